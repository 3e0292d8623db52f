// A random stream's numbers on a device, made a block at a time.
//
// Why blocks: a verifier or drafter that made its one or five numbers each time paid the
// generator per draw (as tensor ops, philox.h, about 650 operators however many numbers one
// call makes: a speculative step dispatched 2,400 kernels instead of 500); this cache makes a
// block of the stream's numbers once and hands out slices. Why on the host: a block is the
// host generator's numbers (Rng::Uniform, the same Philox words as StreamUniforms' tensor ops)
// uploaded in one copy, so a block costs the device one transfer instead of those operators
// (on a GPU each is a launch outside any graph: an ar image's numbers were 650 of its 864).
#ifndef MULO_ENGINE_SAMPLING_UNIFORM_CACHE_H_
#define MULO_ENGINE_SAMPLING_UNIFORM_CACHE_H_

#include <torch/types.h>

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
