#include "server/cuda_graph_policy.h"

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
  if (workers > 1 && mode == "auto") {
    choice.note = absl::StrCat(
        "--cuda_graphs=auto: off with --workers=", workers,
        " on CUDA (concurrent graph captures crashed a server, docs/gpu.md); batch requests "
        "on one worker (--max_batch) to keep graphs, or --cuda_graphs=on to try them");
    return choice;
  }
  choice.enabled = true;
  if (workers > 1) {
    choice.note = absl::StrCat("--cuda_graphs=on with --workers=", workers,
                               ": concurrent captures are not yet proven on a GPU");
  }
  return choice;
}

}  // namespace mulo::server
