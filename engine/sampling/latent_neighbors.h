// The latent neighbour table of a VQ codebook: for every entry, the other entries in order of
// increasing L2 distance between codebook vectors (LANTERN's B_k). Computed once per model at
// load and shared read-only by every request. Built on the raw codebook weights, as LANTERN's
// published table is, not on the L2-normalised vectors a LlamaGen decoder looks up (the pooling
// rules that use the table are in pooling.h).
#ifndef MULO_ENGINE_SAMPLING_LATENT_NEIGHBORS_H_
#define MULO_ENGINE_SAMPLING_LATENT_NEIGHBORS_H_

#include <torch/types.h>

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
  // The same table on the host (the same tensor for a CPU codebook): a verifier working on
  // host copies of its distributions looks neighbours up there instead of reading the device.
  const torch::Tensor& host_table() const { return host_table_; }
  // The table on `device` (the host's or the codebook's).
  const torch::Tensor& TableOn(const torch::Device& device) const {
    return device.is_cpu() ? host_table_ : table_;
  }

 private:
  torch::Tensor table_, host_table_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_LATENT_NEIGHBORS_H_
