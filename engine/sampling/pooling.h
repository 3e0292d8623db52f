// Latent pooling: how much target probability a draft x may borrow from the codebook entries
// nearest to it (LANTERN's relaxed set A). Walking x's neighbours in latent-distance order, c_m
// is the summed target probability of the first m of them; the largest prefix whose c_m stays
// within a bound is pooled, p~(x) = p(x) + c_m. The bound is
//   additive        c_m <= delta                (LANTERN: a total-variation budget)
//   multiplicative  c_m <= (lambda - 1) p(x)    (LANTERN++: at most lambda times x's own mass)
//   none            nothing is pooled           (p~ = p; also additive delta 0, lambda 1, k 0)
// Shared by MuLo-SD's threshold verification and the LANTERN family.
#ifndef MULO_ENGINE_SAMPLING_POOLING_H_
#define MULO_ENGINE_SAMPLING_POOLING_H_

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "engine/core/status.h"
#include "engine/sampling/latent_neighbors.h"

namespace mulo::engine {

enum class Pooling { kAdditive, kMultiplicative, kNone };
const char* PoolingName(Pooling pooling);  // "additive", "multiplicative", "none"
// The inverse of PoolingName; INVALID_ARGUMENT naming `field` otherwise.
StatusOr<Pooling> ParsePooling(const std::string& name, const std::string& field);

// Latent neighbours a request may ask a relaxed rule to consider (LANTERN's and LANTERN++'s k,
// PEANUT's lantern_k).
constexpr int64_t kMaxNeighbours = 65535;

struct PoolingRule {
  Pooling kind = Pooling::kAdditive;
  // Neighbours considered besides x itself (LANTERN's k), capped at the neighbour table.
  int64_t k = 1000;
  double delta = 0.1;   // additive bound, [0, 1]
  double lambda = 2.0;  // multiplicative factor, >= 1

  // INVALID_ARGUMENT naming "<prefix>.k", "<prefix>.delta" or "<prefix>.lambda".
  Status Validate(const std::string& prefix) const;
};

// For draft tokens x_i under target probabilities probs ([L, V]): p(x_i) and p~(x_i), both
// [L] float32 (a relaxed rule needs both: p~ decides, p tells what pooling alone kept).
struct PooledProbabilities {
  torch::Tensor own, pooled;
};
PooledProbabilities Pool(const torch::Tensor& probs, const torch::Tensor& tokens,
                         const LatentNeighbors& neighbors, const PoolingRule& rule);

// p~(x_i) alone: Pool(...).pooled.
torch::Tensor PooledProbability(const torch::Tensor& probs, const torch::Tensor& tokens,
                                const LatentNeighbors& neighbors, const PoolingRule& rule);

// What pooling borrows for each x_i, from one pass over its neighbours: the mass c_m =
// p~(x_i) - p(x_i), [L] float64 and exactly 0 where nothing is pooled (a relaxed verifier's
// "did pooling change anything"), and the neighbours pooled (|A| - 1), [L] int64.
struct PooledSet {
  torch::Tensor borrowed, neighbors;
};
PooledSet PoolSet(const torch::Tensor& probs, const torch::Tensor& tokens,
                  const LatentNeighbors& neighbors, const PoolingRule& rule);

// PoolSet(...).neighbors alone.
torch::Tensor PooledNeighborCount(const torch::Tensor& probs, const torch::Tensor& tokens,
                                  const LatentNeighbors& neighbors, const PoolingRule& rule);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_POOLING_H_
