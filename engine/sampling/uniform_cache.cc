#include "engine/sampling/uniform_cache.h"

#include <algorithm>

#include "engine/sampling/philox.h"

namespace mulo::engine {

torch::Tensor UniformCache::Peek(int64_t count) {
  const uint64_t from = rng_->index();
  const bool inside = block_.defined() && from >= first_ &&
                      from + static_cast<uint64_t>(count) <= first_ + block_.size(0);
  if (!inside) {
    block_ = StreamUniforms(*rng_, std::max(kBlock, count), device_);
    first_ = from;
  }
  return block_.narrow(0, static_cast<int64_t>(from - first_), count);
}

torch::Tensor UniformCache::Take(int64_t count) {
  torch::Tensor numbers = Peek(count);
  rng_->Skip(static_cast<uint64_t>(count));
  return numbers;
}

}  // namespace mulo::engine
