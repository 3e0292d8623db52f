// Exact verification of chains of drafts (Leviathan et al. 2023) as tensor ops on the device
// where the probabilities are, for many requests' chains at once: the engine loop judges every
// waiting request's chain with one set of kernels and one host read (vLLM's one rejection
// sampler over a ragged batch), and a request verifying alone is a batch of one.
//
// Draft i (token x_i, drawn from q_i) is kept when p_i(x_i) >= q_i(x_i) or
// u_i * q_i(x_i) < p_i(x_i), with u_i the i-th acceptance uniform; the kept prefix ends at the
// first rejection. The next token is drawn, with the one draw uniform, from the residual
// max(0, p_a - q_a) renormalised (p_a itself when the residual has no mass) at the first
// rejected position a, or from the bonus row p_L after a fully kept chain (its argmax when
// greedy). These are ExactVerifier's default rules, decision for decision given the same
// uniforms (tests/engine/sampling/chain_rejection_test.cc holds the host loop as the oracle).
#ifndef MULO_ENGINE_SAMPLING_CHAIN_REJECTION_H_
#define MULO_ENGINE_SAMPLING_CHAIN_REJECTION_H_

#include <torch/types.h>

#include <optional>
#include <vector>

namespace mulo::engine {

// What a relaxed chain rule judges draft i by instead of x_i's own masses (GSD's groups).
struct PooledMasses {
  torch::Tensor p, q;       // float64 [L]: the masses compared with u_i
  torch::Tensor neighbors;  // int64 [L]: the tokens pooled with x_i besides itself
};

// One request's chain, all on one device.
struct ChainCall {
  torch::Tensor p;                // [L or L + 1, V]: row i the target at draft i's position;
                                  // row L, when present, the bonus position
  torch::Tensor q;                // [L, V]
  torch::Tensor tokens;           // int64 [L]
  torch::Tensor accept_uniforms;  // float64 [L]
  torch::Tensor draw_uniform;     // float64 [1]
  bool greedy = false;
  std::optional<PooledMasses> pooled;  // judge by these instead of x_i's own masses

  int64_t length() const { return tokens.size(0); }
};

// The calls' decisions, int64 [calls, 4 + L] on their device (L the longest call's length);
// per call: the number of leading drafts kept, the next token (-1 when every draft is kept and
// p has no bonus row), the kept drafts that x_i's own masses would have rejected with the same
// u_i, the neighbours pooled for the judged drafts (the kept ones and the first rejected), then
// per draft i whether it is one of those relaxed kept drafts (1) or not (0); the relaxed
// columns are 0 without pooled masses. The calls share their vocabulary and device, their lengths
// may differ; every operation is row-wise, so call c's row is its decision alone.
torch::Tensor JudgeChains(const std::vector<ChainCall>& calls);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_CHAIN_REJECTION_H_
