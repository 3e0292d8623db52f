// Host -> device copies that do not wait for the device.
//
// Why: LibTorch copies a pageable host tensor to a CUDA device and then waits for the stream
// (so that the host buffer may be freed at once). On a GPU each such upload therefore drains
// the queue of kernels exactly as a host read does (host_read.h), though nothing counts it as
// one. A decode step uploads a few small tensors (positions, a draft tree's mask, ids the host
// chose); staging them in pinned memory and copying asynchronously lets the host run ahead.
// The caching host allocator keeps a pinned block until the copy that reads it has run.
//
// On the CPU these are plain copies (nothing is staged).
#ifndef MULO_ENGINE_CORE_DEVICE_UPLOAD_H_
#define MULO_ENGINE_CORE_DEVICE_UPLOAD_H_

#include <torch/types.h>

namespace mulo::engine {

// `tensor` on `device`: itself when it is there already, an asynchronous copy of it when it is
// on the host and `device` is a GPU, tensor.to(device) otherwise.
torch::Tensor Upload(const torch::Tensor& tensor, const torch::Device& device);

// destination.copy_(source), asynchronous when source is on the host and destination on a GPU.
void UploadInto(const torch::Tensor& destination, const torch::Tensor& source);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_DEVICE_UPLOAD_H_
