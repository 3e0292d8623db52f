// Whether the server's models replay CUDA graphs (--cuda_graphs, --workers, --device).
//
// Why a policy and not a plain switch: graphs are captured per request, on the request's own
// worker thread. With several workers on one GPU, one worker's capture and another's work
// collided on an H200 ("operation not permitted when stream is capturing") and the server
// died (docs/gpu.md, run of 2026-11-26). The capture now waits on its own stream only, which
// should cure it; until a GPU run proves that, `auto` (the default) keeps several workers
// eager and says so, and `on` asks for graphs anyway (to measure it).
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

// `mode`: "auto" (on CUDA with one worker), "on" (on CUDA whatever the workers) or "off";
// anything else is INVALID_ARGUMENT naming --cuda_graphs. Graphs exist on CUDA devices only.
absl::StatusOr<CudaGraphChoice> ChooseCudaGraphs(absl::string_view mode, bool cuda_device,
                                                 int workers);

}  // namespace mulo::server

#endif  // MULO_SERVER_CUDA_GRAPH_POLICY_H_
