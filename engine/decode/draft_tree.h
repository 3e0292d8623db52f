// The shape of a draft tree (EAGLE, LANTERN, LANTERN++): node i's parent (-1 = the root, the
// position after the committed prefix), its depth (1 for the root's children) and its rank
// among its siblings. Nodes are stored parents before children, so one target forward can
// feed them in order with the tree attention mask (each node sees the committed prefix, its
// ancestors and itself) at positions committed + depth - 1.
#ifndef MULO_ENGINE_DECODE_DRAFT_TREE_H_
#define MULO_ENGINE_DECODE_DRAFT_TREE_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

struct TreeShape {
  std::vector<int64_t> parents;  // -1 = the root
  std::vector<int64_t> depths;   // 1 = a child of the root
  std::vector<int64_t> ranks;    // the node's index among its parent's children (draw order)

  int64_t size() const { return static_cast<int64_t>(parents.size()); }
  int64_t max_depth() const;
  // Children of `node` (-1 = the root) in rank order.
  std::vector<int64_t> Children(int64_t node) const;
  // The nodes from the root's child down to `node`.
  std::vector<int64_t> PathTo(int64_t node) const;
};

// A shape from root-to-node paths of sibling ranks ({0}, {1}, {0, 0}, ...), in the given order.
// Every path's parent path must come earlier and siblings' ranks must be 0, 1, 2, ... in order;
// otherwise INVALID_ARGUMENT.
StatusOr<TreeShape> TreeFromPaths(const std::vector<std::vector<int64_t>>& paths);

// A shape from parent indices (each parent earlier than its child, or -1); ranks count each
// parent's children in order.
StatusOr<TreeShape> TreeFromParents(const std::vector<int64_t>& parents);

// The static tree of EAGLE-1 and LANTERN++ ("naive_extend_57"): 57 draft nodes below the root
// (58 with it), depth 5, 5 / 13 / 16 / 14 / 9 nodes per depth, wider where the drafter's
// first choices lead.
TreeShape StaticTree57();

// StaticTree57 without its nodes deeper than `max_depth` (the tree a step drafts where the image
// ends), in the same order; the whole tree for max_depth >= 5, none for max_depth <= 0.
TreeShape StaticTree57Cut(int64_t max_depth);

// [nodes, prefix_rows + nodes] bool: node i attends the prefix_rows cached rows, its ancestors
// and itself.
torch::Tensor TreeAttentionMask(const TreeShape& tree, int64_t prefix_rows);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_DRAFT_TREE_H_
