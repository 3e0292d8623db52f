// Whether the server's models replay CUDA graphs (--cuda_graphs, --workers, --device).
//
// Why a policy and not a plain switch: graphs are captured per request, on the request's own
// worker thread and stream (engine/core/device_stream.h). Streams come from LibTorch's pool of
// 32 per device; more workers than that share streams, and a capture on a shared stream would
// take in the other worker's launches. H200 runs (docs/gpu.md, 2026-11-26) first saw eight
// workers crash, then, with their own streams and no device-wide waits, serve every request
// with graphs; so graphs are on up to 32 workers and impossible beyond.
#ifndef MULO_SERVER_CUDA_GRAPH_POLICY_H_
#define MULO_SERVER_CUDA_GRAPH_POLICY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mulo::server {

struct CudaGraphChoice {
  bool enabled = false;
  std::string note;  // what the start-up log should say about it; empty when nothing
};

// Workers that can each have a stream of their own (LibTorch's pool size).
inline constexpr int kMaxCudaGraphWorkers = 32;

// `mode`: "auto" (on CUDA with up to kMaxCudaGraphWorkers workers, off with a note beyond),
// "on" (the same, INVALID_ARGUMENT naming --cuda_graphs beyond) or "off"; anything else is
// INVALID_ARGUMENT naming --cuda_graphs. Graphs exist on CUDA devices only.
absl::StatusOr<CudaGraphChoice> ChooseCudaGraphs(absl::string_view mode, bool cuda_device,
                                                 int workers);

}  // namespace mulo::server

#endif  // MULO_SERVER_CUDA_GRAPH_POLICY_H_
