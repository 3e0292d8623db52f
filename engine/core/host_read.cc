#include "engine/core/host_read.h"

#include <map>
#include <string>
#include <utility>

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

namespace {

// The values of an int64 tensor already on the host, in flat order.
std::vector<int64_t> IdsOf(const torch::Tensor& host) {
  const torch::Tensor flat = host.contiguous();
  return std::vector<int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
}

}  // namespace

std::vector<int64_t> HostReadIds(const torch::Tensor& tensor) {
  return IdsOf(HostRead(tensor.flatten(), torch::kInt64));
}

StatusOr<torch::Tensor> HostReadWith(HostReader* reader, const torch::Tensor& tensor,
                                     torch::ScalarType dtype) {
  if (reader != nullptr) return reader->Read(tensor, dtype);
  return HostRead(tensor, dtype);
}

StatusOr<std::vector<int64_t>> HostReadIdsWith(HostReader* reader, const torch::Tensor& tensor) {
  if (reader == nullptr) return HostReadIds(tensor);
  MULO_ASSIGN_OR_RETURN(const torch::Tensor flat, reader->Read(tensor.flatten(), torch::kInt64));
  return IdsOf(flat);
}

std::vector<torch::Tensor> HostReadTogether(const std::vector<torch::Tensor>& tensors,
                                            const std::vector<torch::ScalarType>& dtypes) {
  // Transfers by (device, dtype), each tensor's index kept.
  std::map<std::pair<std::string, int>, std::vector<size_t>> transfers;
  for (size_t i = 0; i < tensors.size(); ++i) {
    transfers[{tensors[i].device().str(), static_cast<int>(dtypes[i])}].push_back(i);
  }
  std::vector<torch::Tensor> out(tensors.size());
  for (const auto& [key, members] : transfers) {
    if (members.size() == 1) {
      out[members[0]] = HostRead(tensors[members[0]], dtypes[members[0]]);
      continue;
    }
    std::vector<torch::Tensor> flat;
    flat.reserve(members.size());
    for (size_t i : members) flat.push_back(tensors[i].to(dtypes[i]).flatten());
    const torch::Tensor host = HostRead(torch::cat(flat));
    int64_t offset = 0;
    for (size_t i : members) {
      const int64_t n = tensors[i].numel();
      out[i] = host.narrow(0, offset, n).view(tensors[i].sizes());
      offset += n;
    }
  }
  return out;
}

}  // namespace mulo::engine
