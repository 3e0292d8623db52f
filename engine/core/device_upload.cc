#include "engine/core/device_upload.h"

namespace mulo::engine {
namespace {

bool Staged(const torch::Tensor& source, const torch::Device& destination) {
  return source.device().is_cpu() && destination.is_cuda();
}

// A pinned copy of a host tensor (one host memcpy): the source of an asynchronous copy.
torch::Tensor Pinned(const torch::Tensor& host) {
  return host.is_pinned() ? host : host.contiguous().pin_memory();
}

}  // namespace

torch::Tensor Upload(const torch::Tensor& tensor, const torch::Device& device) {
  if (!tensor.defined() || tensor.device() == device) return tensor;
  if (!Staged(tensor, device)) return tensor.to(device);
  return Pinned(tensor).to(device, /*non_blocking=*/true);
}

void UploadInto(const torch::Tensor& destination, const torch::Tensor& source) {
  if (!Staged(source, destination.device())) {
    destination.copy_(source);
    return;
  }
  destination.copy_(Pinned(source), /*non_blocking=*/true);
}

}  // namespace mulo::engine
