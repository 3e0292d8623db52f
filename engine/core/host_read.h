// Device -> host reads on the decode path, counted. On a CUDA device each such read waits for
// every kernel queued before it (a host synchronisation), so the engine routes the reads a
// decision needs (the sampled token, a verifier's p and q, a resampler's ids) through these
// helpers and a request reports how many it paid (Stats::host_syncs).
//
// Call sites are those whose tensor lives on the model's device in a GPU run; they count on
// every device, so a CPU run reports the synchronisations the same request would pay on a GPU.
// Reads of tensors already copied to the host are plain torch calls and are not counted.
//
// Why a counter per execution context instead of per-request state: the reads sit in sampling
// and verification functions (sampler, verifiers, resampler) that take no request, and
// threading a counter through all of them would change a dozen signatures for bookkeeping. A
// request decodes in one context from Begin to Finish (its fiber on the engine loop, or its
// thread; execution_counters.h), and SteppedMethod::Decode reads the counter before and after
// and stores the difference in the request's Stats; the counter only grows.
#ifndef MULO_ENGINE_CORE_HOST_READ_H_
#define MULO_ENGINE_CORE_HOST_READ_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

// Device -> host reads made so far in this execution context (never reset; take differences).
int64_t HostReadCount();
void CountHostRead();

// tensor.to(torch::kCPU[, dtype]), counted as one read.
torch::Tensor HostRead(const torch::Tensor& tensor);
torch::Tensor HostRead(const torch::Tensor& tensor, torch::ScalarType dtype);

// The values of an int64 tensor (token ids) in flat order, counted as one read.
std::vector<int64_t> HostReadIds(const torch::Tensor& tensor);

// Where a request's reads go: at once (no reader), or, from a request of the engine loop, into
// the loop's next batched read (engine_loop.h), which brings every waiting request's tensors to
// the host in one transfer per device and dtype: on a GPU, a round of many requests then waits
// on the device once, not once per request.
class HostReader {
 public:
  virtual ~HostReader() = default;
  // tensor.to(kCPU, dtype), counted as one read of the caller's; INTERNAL when it failed.
  virtual StatusOr<torch::Tensor> Read(const torch::Tensor& tensor, torch::ScalarType dtype) = 0;
};

// HostRead(tensor, dtype) through `reader` when there is one, else at once.
StatusOr<torch::Tensor> HostReadWith(HostReader* reader, const torch::Tensor& tensor,
                                     torch::ScalarType dtype);
// HostReadIds through `reader` when there is one, else at once.
StatusOr<std::vector<int64_t>> HostReadIdsWith(HostReader* reader, const torch::Tensor& tensor);

// Each tensor on the host in its dtype: one transfer, counted as one read, per device and
// dtype (the tensors flattened into one buffer, then split).
std::vector<torch::Tensor> HostReadTogether(const std::vector<torch::Tensor>& tensors,
                                            const std::vector<torch::ScalarType>& dtypes);

// tensor.item<T>(), counted as one read.
template <typename T>
T ItemOf(const torch::Tensor& tensor) {
  CountHostRead();
  return tensor.item<T>();
}

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_HOST_READ_H_
