#include "server/cuda_graph_policy.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mulo::server {

absl::StatusOr<CudaGraphChoice> ChooseCudaGraphs(absl::string_view mode, bool cuda_device,
                                                 int workers) {
  if (mode != "auto" && mode != "on" && mode != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda_graphs: expected auto, on or off, got \"", mode, "\""));
  }
  CudaGraphChoice choice;
  if (mode == "off" || !cuda_device) return choice;
  if (workers > kMaxCudaGraphWorkers) {
    const std::string why = absl::StrCat(
        " with --workers=", workers, ": more than ", kMaxCudaGraphWorkers,
        " workers share CUDA streams, and a capture on a shared stream would take in another "
        "worker's work; batch requests on fewer workers (--max_batch) to keep graphs");
    if (mode == "on") return absl::InvalidArgumentError(absl::StrCat("--cuda_graphs=on", why));
    choice.note = absl::StrCat("--cuda_graphs=auto: off", why);
    return choice;
  }
  choice.enabled = true;
  return choice;
}

}  // namespace mulo::server
