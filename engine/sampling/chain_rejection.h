// Exact verification of a chain of drafts (Leviathan et al. 2023) as tensor ops on the device
// where the probabilities are, so a verify step costs one small host read instead of copying
// p and q to the host.
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

#include <torch/torch.h>

namespace mulo::engine {

// p [L or L + 1, V] (row i: the target at draft i's position; row L, when present, the bonus
// position), q [L, V], tokens int64 [L], accept_uniforms float64 [L], draw_uniform float64 [1],
// all on one device. Returns int64 [2] there: the number of leading drafts kept, then the next
// token (-1 when every draft is kept and p has no bonus row).
torch::Tensor VerifyChain(const torch::Tensor& p, const torch::Tensor& q,
                          const torch::Tensor& tokens, const torch::Tensor& accept_uniforms,
                          const torch::Tensor& draw_uniform, bool greedy);

// What a relaxed chain rule judges draft i by instead of x_i's own masses (GSD's groups).
struct PooledMasses {
  torch::Tensor p, q;       // float64 [L]: the masses compared with u_i
  torch::Tensor neighbors;  // int64 [L]: the tokens pooled with x_i besides itself
};

// VerifyChain, judging draft i by pooled.p[i] and pooled.q[i] (the residual and the bonus as
// before). Returns int64 [4]: the kept length, the next token, the kept drafts that x_i's own
// masses would have rejected with the same u_i, and the neighbours pooled for the judged
// drafts (the kept ones and the first rejected).
torch::Tensor VerifyPooledChain(const torch::Tensor& p, const torch::Tensor& q,
                                const torch::Tensor& tokens, const torch::Tensor& accept_uniforms,
                                const torch::Tensor& draw_uniform, bool greedy,
                                const PooledMasses& pooled);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_CHAIN_REJECTION_H_
