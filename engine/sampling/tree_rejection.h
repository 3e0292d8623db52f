// Verification of a draft tree as tensor ops on the device where p is: a deterministic tree
// (EAGLE-2's, PEANUT's: each node's children are top-k tokens of one distribution, so q is
// one-hot) or a static one (EAGLE-1's: children drawn without replacement from q, TreeCall::q),
// with no host read: TreeVerifier's lossless rules (tree_verifier.h), decision for decision
// given the same numbers, so that a tree step can verify and read its verdict once (issue 61)
// and the walk could be captured in a graph (every shape is fixed by the tree's size and the
// depth bound; nothing is read while it runs).
//
// The walk from the root: at each level the current node's children are tried in draft
// order, each with the acceptance stream's next number u (the host's: one per tried child).
//   - Deterministic tree: child x with sibling rank k is kept when u < p'(x), p'(x) = p(x) for
//     k = 0 and p(x) / (S - the earlier siblings' mass) after k rejections (S: the row's mass),
//     which is p renormalised without the rejected tokens, as the host's walk makes it.
//   - Static tree: child x is kept when p'(x) >= q_x(x) or u q_x(x) < p'(x), p' after each
//     rejected sibling s becoming norm(max(p' - q_s, 0)); that chain is sequential over a
//     node's siblings, so it runs sibling rank by sibling rank for every node at once.
// When no child is kept (or the node is a leaf) the next token is drawn with the draw stream's
// number from what is left of the row (DrawRows, the host draw's decisions). Greedy: a child is
// kept when it is the argmax after its parent, and among kept siblings the one with the
// longest kept path wins (the first on ties), as the host's Greedy; siblings being distinct
// tokens, at most one is kept.
//
// The walk is not a loop: every draft's number is fixed by its ancestors' sibling ranks (the
// walk reaches it after trying exactly its ancestors, their earlier siblings and its own), so
// every draft is judged at once and the path is where each ancestor is its parent's first
// kept child: a fixed set of operators whatever the walk.
//
// EAGLE-2 and PEANUT verify here (eagle.cc), eagerly or in the verify graphs
// (tree_verify_graphs.h). EAGLE-1's static trees verify here only inside the graphs: outside
// one their residual chain adds ~40 operators per sibling rank (~520 for StaticTree57's five
// ranks against ~310 for a deterministic tree), more than the read it would save (EAGLE-1
// measured 2,575 -> 2,950 operators per step), so the eager static step walks on the host.
// LANTERN's relaxed rules: relaxed_tree_rejection.h.
#ifndef MULO_ENGINE_SAMPLING_TREE_REJECTION_H_
#define MULO_ENGINE_SAMPLING_TREE_REJECTION_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

// One request's tree, all on one device.
struct TreeCall {
  // [L + 1, V]: row 0 the target after the root (the last committed token), row 1 + i after
  // draft i (the verify forward's order).
  torch::Tensor p;        // float32
  torch::Tensor tokens;   // int64 [L]
  torch::Tensor parents;  // int64 [L]: the parent draft (-1 = the root), parents first
  torch::Tensor accept_uniforms;  // float64 [L]: the acceptance stream's next numbers
  torch::Tensor draw_uniform;     // float64 [1]: the draw stream's next number
  bool greedy = false;            // the uniforms are not read
  int64_t max_depth = 0;          // at least the tree's depth (the root's children: 1)
  // bool [L, L]: row i, draft i's ancestors and itself; undefined: made from the parents.
  torch::Tensor ancestors;
  // A static tree (EAGLE-1's): float32 [L, V], what each draft was drawn from without
  // replacement; undefined for a deterministic tree (q one-hot).
  torch::Tensor q;
  // bool [L]: whether each draw found mass; a draft that did not is dropped with its subtree,
  // as the host does. Undefined: all did.
  torch::Tensor valid;
  int64_t max_children = 0;  // with q: the most children of one node

  int64_t size() const { return tokens.size(0); }
};

// int64 [3 + max_depth] on p's device: the kept path's length, the acceptance numbers the walk
// used, the next token, then the kept drafts root first (-1 after the path).
torch::Tensor JudgeTree(const TreeCall& call);

// bool [L, L] on the parents' device: row i holds draft i's ancestors and draft i itself, for
// parents int64 [L] (-1 = the root, parents first) of a tree at most `max_depth` deep. By
// squaring "my parent or me" ceil(log2(max_depth)) times: a few operators whatever the depth.
torch::Tensor TreeAncestors(const torch::Tensor& parents, int64_t max_depth);

// The kept path of a tree judged draft by draft: `first` bool [L], whether each draft is its
// parent's first kept child; `ancestors` as TreeAncestors makes them. Shared by JudgeTree and
// the relaxed walk (relaxed_tree_rejection.h).
struct TreePath {
  torch::Tensor on_path;  // bool [L]: the draft and each of its ancestors are first kept
  torch::Tensor row;      // int64 [1]: the row after the path (0 the root, 1 + i after draft i)
  torch::Tensor path;     // int64 [max_depth]: the kept drafts root first, -1 after
  torch::Tensor length;   // int64 [1]: the kept drafts
};
TreePath PathOfFirstKept(const torch::Tensor& first, const torch::Tensor& ancestors,
                         int64_t max_depth);

struct TreeDecision {
  std::vector<int64_t> accepted;  // the kept drafts, root first
  int64_t next_token = -1;
  int64_t tries = 0;  // acceptance numbers used (0 when greedy)
};
// The decision from JudgeTree's values read to the host; INVALID_ARGUMENT when they are not
// 3 + max_depth of them or the path is out of range.
StatusOr<TreeDecision> TreeDecisionFromHost(const std::vector<int64_t>& values, int64_t size,
                                            int64_t max_depth);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_TREE_REJECTION_H_
