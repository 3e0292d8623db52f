#include "engine/sampling/uniform_cache.h"

#include <algorithm>

#include "engine/core/device_upload.h"

namespace mulo::engine {

torch::Tensor UniformCache::Peek(int64_t count) {
  const uint64_t from = rng_->index();
  const bool inside = block_.defined() && from >= first_ &&
                      from + static_cast<uint64_t>(count) <= first_ + block_.size(0);
  if (!inside) {
    const int64_t size = std::max(kBlock, count);
    torch::Tensor host = torch::empty({size}, torch::kFloat64);
    double* const numbers = host.data_ptr<double>();
    Rng stream = *rng_;  // a copy: Peek does not move the stream
    for (int64_t i = 0; i < size; ++i) numbers[i] = stream.Uniform();
    block_ = Upload(host, device_);
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
