// MuLo-SD's acceptance (paper Section 3, Algorithm 1 line "accept if p(A) >= tau"): every draft
// position is judged on its own, kept when the target's pooled probability p~(x) over the
// draft's latent neighbourhood (pooling.h: additive as the paper, multiplicative as LANTERN++,
// or none) reaches tau. No replacement is drawn: MuLo-SD expands the rejections locally and
// re-samples them itself.
#ifndef MULO_ENGINE_SAMPLING_POOLED_THRESHOLD_VERIFIER_H_
#define MULO_ENGINE_SAMPLING_POOLED_THRESHOLD_VERIFIER_H_

#include "engine/sampling/latent_neighbors.h"
#include "engine/sampling/pooling.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

class PooledThresholdVerifier : public Verifier {
 public:
  PooledThresholdVerifier(double tau, PoolingRule pooling, const LatentNeighbors& neighbors)
      : tau_(tau), pooling_(pooling), neighbors_(neighbors) {}
  // Verdict::relaxed lists the drafts kept only thanks to pooling (p(x) < tau).
  StatusOr<Verdict> Verify(const VerifyInput& input, const VerifierRngs& rngs) const override;

  // Verify in two halves, for a caller that reads more with the same host read: the pooled and
  // own probabilities [2, L] of draft tokens `tokens` (int64 [L], on p's device) under p
  // [>= L, V], left where p is; then the verdict from their host copy.
  torch::Tensor PooledAndOwn(const torch::Tensor& p, const torch::Tensor& tokens) const;
  Verdict Judge(const torch::Tensor& pooled_and_own) const;
  // The same from host values (float32 values as doubles), with no tensor operator.
  Verdict Judge(const std::vector<double>& pooled, const std::vector<double>& own) const;
  // Judge's decisions where the probabilities are, for a caller that acts on them before its
  // read: bool [L], true where the draft is kept (the pooled mass, as float32, reaches tau).
  torch::Tensor Kept(const torch::Tensor& pooled_and_own) const;

 private:
  double tau_;
  PoolingRule pooling_;
  const LatentNeighbors& neighbors_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_POOLED_THRESHOLD_VERIFIER_H_
