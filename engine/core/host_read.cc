#include "engine/core/host_read.h"

#include "engine/core/execution_counters.h"

namespace mulo::engine {

int64_t HostReadCount() { return CurrentCounters().host_reads; }

void CountHostRead() { ++CurrentCounters().host_reads; }

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
