// The latent neighbour table of a VQ codebook: for every entry, the other entries in order of
// increasing L2 distance between codebook vectors (LANTERN's B_k). Computed once per model at
// load and shared read-only by every request. We use the vectors the decoder looks up
// (L2-normalised for LlamaGen-style codebooks), where distance is what the image sees.
#ifndef MULO_ENGINE_SAMPLING_LATENT_NEIGHBORS_H_
#define MULO_ENGINE_SAMPLING_LATENT_NEIGHBORS_H_

#include <torch/torch.h>

#include <cstdint>

namespace mulo::engine {

class LatentNeighbors {
 public:
  // Keeps the `max_neighbors` nearest other entries of each of the V entries (capped at V - 1).
  // Ties are broken by entry index so the table is deterministic.
  static LatentNeighbors Build(const torch::Tensor& codebook, int64_t max_neighbors);

  int64_t codebook_size() const { return table_.size(0); }
  int64_t max_neighbors() const { return table_.size(1); }
  // [V, max_neighbors] int64 on the codebook's device.
  const torch::Tensor& table() const { return table_; }

 private:
  torch::Tensor table_;
};

// LANTERN pooling. For draft tokens x_i with target probabilities probs[i] ([L, V]) returns,
// per position, p(x_i) + c_i where c_i is the largest prefix sum of the target probabilities
// of x_i's neighbours (in latent-distance order, at most k - 1 of them: B_k counts x_i itself)
// that stays <= delta. k = 1 is the token alone; delta = 0 pools nothing extra unless the
// neighbours have zero probability. Returns [L] float32.
torch::Tensor PooledProbability(const torch::Tensor& probs, const torch::Tensor& tokens,
                                const LatentNeighbors& neighbors, int64_t k, double delta);

// The number of neighbours pooled for each position by PooledProbability (|A_{k,delta}| - 1).
torch::Tensor PooledNeighborCount(const torch::Tensor& probs, const torch::Tensor& tokens,
                                  const LatentNeighbors& neighbors, int64_t k, double delta);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_LATENT_NEIGHBORS_H_
