// The exact speculative-sampling acceptance rule (Leviathan et al., Chen et al.): a draft
// token x drawn from q is kept with probability min(1, p(x) / q(x)); otherwise a replacement
// is drawn from the residual norm(max(p - q, 0)). The output is then distributed exactly as
// p, whatever q is (proved in tests/engine/decode/speculative_test.cc,
// SpeculativeAcceptanceTest, and tests/engine/sampling/verifier_test.cc).
#ifndef MULO_ENGINE_SAMPLING_SPECULATIVE_ACCEPTANCE_H_
#define MULO_ENGINE_SAMPLING_SPECULATIVE_ACCEPTANCE_H_

#include <torch/types.h>

#include "engine/sampling/rng.h"

namespace mulo::engine {

// Draws u ~ U[0, 1) and accepts when u * q(x) < p(x), i.e. with probability min(1, p/q).
// Greedy one-hot p and q accept exactly when the argmaxes agree.
bool AcceptDraft(double p_x, double q_x, Rng& rng);

// norm(max(p - q, 0)) for p, q [V]. When p <= q everywhere (only possible if p == q, in which
// case rejection has probability 0) it falls back to p.
torch::Tensor ResidualDistribution(const torch::Tensor& p, const torch::Tensor& q);
// The same for p and q already read to the host (a verifier's loop over its copies): no
// host read is counted, as none happens on a GPU.
torch::Tensor HostResidualDistribution(const torch::Tensor& p, const torch::Tensor& q);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_SPECULATIVE_ACCEPTANCE_H_
