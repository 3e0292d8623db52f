// A random stream's numbers on a device, made a block at a time.
//
// Why: the counter-based generator runs as integer tensor ops (philox.h), about 200 operators
// however many numbers one call makes. A verifier or drafter that asked for its one or five
// numbers each time paid those operators per draw (a speculative step dispatched 2,400 kernels
// instead of 500); this cache makes a block of the stream's numbers once and hands out slices.
#ifndef MULO_ENGINE_SAMPLING_UNIFORM_CACHE_H_
#define MULO_ENGINE_SAMPLING_UNIFORM_CACHE_H_

#include <torch/torch.h>

#include "engine/sampling/rng.h"

namespace mulo::engine {

class UniformCache {
 public:
  static constexpr int64_t kBlock = 1024;

  // `rng` must outlive the cache; only Take moves it.
  UniformCache(Rng* rng, torch::Device device) : rng_(rng), device_(device) {}

  // The stream's next `count` numbers, as `count` calls of its Uniform() would return them:
  // float64 [count] on the device. The stream does not move: for a caller that knows only
  // afterwards how many it consumed, and Skips the stream by that.
  torch::Tensor Peek(int64_t count);
  // Peek, and move the stream past the `count` numbers.
  torch::Tensor Take(int64_t count);

 private:
  Rng* rng_;
  torch::Device device_;
  torch::Tensor block_;  // the stream's numbers [first_, first_ + block_.size(0))
  uint64_t first_ = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_UNIFORM_CACHE_H_
