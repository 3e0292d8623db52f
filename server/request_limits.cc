#include "server/request_limits.h"

#include "absl/strings/str_cat.h"

namespace mulo::server {

absl::Status CheckRequestLimits(const ValidatedRequest& request, const RequestLimits& limits) {
  const int64_t bound = limits.max_tree_nodes;
  if (bound <= 0) return absl::OkStatus();
  // Each method's spec says which trees its options make (the plan's trees); chains and windows
  // are bounded by the methods' own option ranges.
  for (const engine::TreeDemand& tree : request.plan.trees) {
    if (tree.nodes > bound) {
      return absl::InvalidArgumentError(absl::StrCat(tree.field, ": ", tree.what, " = ",
                                                     tree.nodes,
                                                     " nodes per step; this server takes at most ",
                                                     bound, " (--max_tree_nodes)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mulo::server
