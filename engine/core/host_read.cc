#include "engine/core/host_read.h"

namespace mulo::engine {
namespace {

// The one per-thread counter (see the header for why it is not per-request state).
int64_t& Counter() {
  thread_local int64_t count = 0;
  return count;
}

}  // namespace

int64_t HostReadCount() { return Counter(); }

void CountHostRead() { ++Counter(); }

torch::Tensor HostRead(const torch::Tensor& tensor) {
  CountHostRead();
  return tensor.to(torch::kCPU);
}

torch::Tensor HostRead(const torch::Tensor& tensor, torch::ScalarType dtype) {
  CountHostRead();
  return tensor.to(torch::kCPU, dtype);
}

std::vector<int64_t> HostReadIds(const torch::Tensor& tensor) {
  const torch::Tensor flat = HostRead(tensor.flatten(), torch::kInt64).contiguous();
  return std::vector<int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
}

}  // namespace mulo::engine
