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

}  // namespace mulo::engine
