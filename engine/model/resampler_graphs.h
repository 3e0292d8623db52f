// CUDA graphs of a resampler's Apply on drawn ids (MuLo-SD's U_r), captured once at load per
// worker (kv_pools.h) and shared by its requests: one replay instead of the ~560 operators a
// 64-token up-sampling dispatches (its convolutions, norms and the codebook's logits), which
// made U_r the largest part of a MuLo-SD step outside graphs once its drafter rows were
// replayed whole (issue 61).
//
// Keys: (images, rows): images padded up to a power of two, rows the batch's tallest input
// grid (1 .. height). A batch's images are padded at the bottom to the tallest with id 0, as
// Resampler::ApplyBatch stacks them: every convolution is row-causal, so no real row reads a
// pad row. A lone image runs at its own height, with the operators and shapes of
// Resampler::ApplyDrawn, hence its bits.
// Emulated graphs (LoadOptions::emulate_cuda_graphs) run the captured body eagerly at each
// replay, counted as one replay with none of its operators (op_count.h).
#ifndef MULO_ENGINE_MODEL_RESAMPLER_GRAPHS_H_
#define MULO_ENGINE_MODEL_RESAMPLER_GRAPHS_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/pool_graphs.h"
#include "engine/model/resampler.h"

namespace mulo::engine {

class ResamplerGraphs {
 public:
  // Captures (or, `emulated`, emulates) the graphs of `resampler` on input grids of `width`
  // columns and 1 .. `height` rows, for batches of 1 .. `images` images, on `device`. A key
  // whose capture fails is left out and counted (its calls then run eagerly: Fits).
  static StatusOr<std::shared_ptr<ResamplerGraphs>> Capture(
      std::shared_ptr<const Resampler> resampler, int64_t height, int64_t width, int64_t images,
      torch::Device device, bool emulated);

  const Resampler& resampler() const { return *resampler_; }
  // Whether `call` may run from these graphs: drawn ids of one image ([1, h * w], int64, not
  // range-checked) on a grid of this width and at most this height whose key was captured.
  bool Fits(const ResampleCall& call) const;
  // Every call's ApplyDrawn from one replay: ids [1, H * W] per call, on the device (copies).
  // INVALID_ARGUMENT for a call that does not Fit; a batch whose key failed to capture runs
  // call by call.
  StatusOr<std::vector<torch::Tensor>> Run(const std::vector<ResampleCall>& calls) const;

  PoolGraphs::Counts counts() const;

  ResamplerGraphs(const ResamplerGraphs&) = delete;
  ResamplerGraphs& operator=(const ResamplerGraphs&) = delete;
  ~ResamplerGraphs();

 private:
  using Key = std::pair<int64_t, int64_t>;  // (images, rows)
  struct Entry;
  ResamplerGraphs(std::shared_ptr<const Resampler> resampler, int64_t height, int64_t width,
                  torch::Device device, bool emulated);
  Status CaptureKey(const Key& key);

  const std::shared_ptr<const Resampler> resampler_;
  const int64_t height_, width_;
  const torch::Device device_;
  const bool emulated_;
  std::map<Key, std::unique_ptr<Entry>> entries_;
  struct MemoryPool;
  std::unique_ptr<MemoryPool> memory_pool_;
  mutable std::mutex mu_;  // counts_ only
  mutable PoolGraphs::Counts counts_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_RESAMPLER_GRAPHS_H_
