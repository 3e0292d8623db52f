// GSD's acceptance (So et al. 2025, "Grouped Speculative Decoding", supplement Algorithm 2): the
// exact chain rule, except that draft x is judged together with a group G(x) of tokens the
// target ranks next to it: of the `size` tokens around x in the target's probability order
// (size / 2 less likely, size - 1 - size / 2 more likely), those whose probability is within
// `max_probability_gap` of p(x) and whose AR input embeddings lie within squared distance
// `max_embedding_distance` of x's. x is kept with min(1, p(G) / q(G)); a rejection is replaced
// from norm(max(p - q, 0)) exactly as SJD. Relaxed: image tokens that look alike compete for
// the same probability mass, so a draft whose own p(x) is small but whose group's is not
// survives. size 1 (G = {x}) is the exact rule, draw for draw.
#ifndef MULO_ENGINE_SAMPLING_GROUP_VERIFIER_H_
#define MULO_ENGINE_SAMPLING_GROUP_VERIFIER_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "engine/sampling/exact_verifier.h"

namespace mulo::engine {

struct GroupRule {
  int64_t size = 14;                    // paper: 14 (7 less likely, x, 6 more likely)
  double max_probability_gap = 0.15;    // paper: 0.15
  double max_embedding_distance = 0.5;  // squared L2 (paper: 0.5, in Lumina-mGPT's embeddings)
};

// The masses of G(x_i) for every draft x_i = tokens[i] under p [L, V] and q [L, V], as tensor
// ops on p's device (no host read, so CUDA graphs capture it: verify_graphs.h): Group's groups
// (the descending order with ties by id, the rank window of `size`, the gap and the squared
// distance, the distances in double from `embeddings`, the float32 [V, dim] rows on p's device).
// `max_probability_gap` and `max_embedding_distance` are float64 tensors that broadcast against
// [L, 1] (a 0-dim one for a chain of one rule). Vocabularies below 2^24 ids.
PooledMasses GroupMasses(const torch::Tensor& p, const torch::Tensor& q, const torch::Tensor& tokens,
                         const torch::Tensor& embeddings, int64_t size,
                         const torch::Tensor& max_probability_gap,
                         const torch::Tensor& max_embedding_distance);

class GroupVerifier : public ExactVerifier {
 public:
  // `embeddings`: the target's token embeddings [V, dim] (copied to the host as float32).
  GroupVerifier(GroupRule rule, const torch::Tensor& embeddings,
                AcceptRule accept = AcceptRule(), ResidualRule residual = ResidualRule());

  // G(x) under the target distribution p [V] (host float32): x first, then the kept
  // candidates.
  std::vector<int64_t> Group(const torch::Tensor& p, int64_t x) const;

 protected:
  Judgement Judge(const torch::Tensor& p, const torch::Tensor& q, int64_t x,
                  Rng& accept) const override;
  // The exact verifier's condition, and a vocabulary the device path's keys can hold.
  bool JudgesOnDevice() const override;
  // The groups' masses of every draft at once, as tensor ops where p is: the same groups as
  // Group (the descending order with ties by id, the rank window, the gap and the distance,
  // the distances in double from the float32 rows), so the device path keeps what the host
  // keeps.
  std::optional<PooledMasses> PooledMassesOnDevice(const torch::Tensor& p, const torch::Tensor& q,
                                                   const torch::Tensor& tokens) const override;

 private:
  GroupRule rule_;
  torch::Tensor embeddings_;         // [V, dim] float32 on the host (Group)
  torch::Tensor device_embeddings_;  // the same where the model is (PooledMassesOnDevice)
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_GROUP_VERIFIER_H_
