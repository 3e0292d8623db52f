// MuLo-SD's acceptance (paper Section 3, Algorithm 1 line "accept if p(A) >= tau"): every draft
// position is judged on its own, kept when the target's pooled probability over the draft's
// latent neighbourhood A_{k,delta}(x) (LANTERN's pooling: x plus its nearest codebook
// entries while their summed mass stays within delta) reaches tau. No replacement is drawn:
// MuLo-SD expands the rejections locally and re-samples them itself. k = 1 is no pooling.
#ifndef MULO_ENGINE_SAMPLING_POOLED_THRESHOLD_VERIFIER_H_
#define MULO_ENGINE_SAMPLING_POOLED_THRESHOLD_VERIFIER_H_

#include <cstdint>

#include "engine/sampling/latent_neighbors.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

class PooledThresholdVerifier : public Verifier {
 public:
  PooledThresholdVerifier(double tau, int64_t k, double delta, const LatentNeighbors& neighbors)
      : tau_(tau), k_(k), delta_(delta), neighbors_(neighbors) {}
  StatusOr<Verdict> Verify(const VerifyInput& input, const VerifierRngs& rngs) const override;

 private:
  double tau_;
  int64_t k_;  // |B_k| including the draft itself, capped at the neighbour table
  double delta_;
  const LatentNeighbors& neighbors_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_POOLED_THRESHOLD_VERIFIER_H_
