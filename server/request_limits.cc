#include "server/request_limits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/decode/dynamic_tree.h"
#include "engine/decode/pac_tree_size.h"

namespace mulo::server {
namespace {

absl::Status TooLarge(const std::string& field, const std::string& what, int64_t nodes,
                      int64_t bound) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what, " = ", nodes,
                                                 " nodes per step; this server takes at most ",
                                                 bound, " (--max_tree_nodes)"));
}

// `prefix`: the tree's message on the wire ("eagle", "lantern.tree", "peanut.tree").
absl::Status CheckTree(const engine::DynamicTreeOptions& tree, const std::string& prefix,
                       int64_t bound) {
  if (tree.total_tokens > bound) {
    return TooLarge(prefix + ".total_tokens", "a tree verifying total_tokens", tree.total_tokens,
                    bound);
  }
  if (tree.depth * tree.top_k > bound) {
    return TooLarge(prefix + ".top_k",
                    absl::StrCat("a tree expanding depth ", tree.depth, " x top_k ", tree.top_k),
                    tree.depth * tree.top_k, bound);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRequestLimits(const ValidatedRequest& request, const RequestLimits& limits) {
  const int64_t bound = limits.max_tree_nodes;
  if (bound <= 0) return absl::OkStatus();
  const engine::MethodConfig& config = request.method_config;
  if (request.method == "eagle" && !config.eagle.static_tree) {
    return CheckTree(config.eagle.dynamic, "eagle", bound);
  }
  if (request.method == "lantern" && !config.lantern.tree.static_tree) {
    return CheckTree(config.lantern.tree.dynamic, "lantern.tree", bound);
  }
  if (request.method == "peanut") {
    if (absl::Status initial = CheckTree(config.peanut.tree, "peanut.tree", bound); !initial.ok()) {
      return initial;
    }
    // The adapted shapes stay strictly inside (min_depth, max_depth) x (min_top_k, max_top_k).
    const auto& shape = config.peanut.shape;
    const int64_t widest = (shape.max_depth - 1) * (shape.max_top_k - 1);
    if (widest > bound) {
      return TooLarge("peanut.max_top_k",
                      absl::StrCat("adapted trees up to depth ", shape.max_depth - 1, " x top_k ",
                                   shape.max_top_k - 1),
                      widest, bound);
    }
  }
  if (request.method == "sjd_pac") {
    const auto& pac = config.sjd_pac;
    const int64_t nodes = engine::PacTreeNodes(pac.width, pac.depth);
    if (nodes > bound) {
      return TooLarge("sjd_pac.width",
                      absl::StrCat("a tree branching width ", pac.width, " to depth ", pac.depth),
                      nodes, bound);
    }
  }
  // EAGLE-1's and LANTERN++'s static trees are fixed (58 nodes), and the other methods draft
  // chains or windows bounded by their own validation.
  return absl::OkStatus();
}

}  // namespace mulo::server
