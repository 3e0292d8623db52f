// LANTERN's and LANTERN++'s relaxed verification of a draft tree as tensor ops on the device
// where p is: TreeVerifier's walk with a latent relaxation (tree_verifier.h), decision for
// decision given the same numbers, and its counts (relaxed accepts, drafts pooled, neighbours
// pooled), with no host read and shapes fixed by the tree's size, its depth bound and the
// neighbours considered: what a verify graph can hold (issue 61), as JudgeTree is for the
// lossless rules (tree_rejection.h).
//
// Sampled, each tried child x (in draft order under its parent) meets the exact test with the
// acceptance stream's next number u1 (kept when p' >= q or u1 q < p'), and, when that rejects
// and pooling borrowed c_m > 0 with b = min(1, (p' + c_m) / q) > a = min(1, p' / q), a second
// chance with the next number u2 (kept when u2 (1 - a) < b - a). c_m pools x's neighbours in
// the residual p' at its try (pooling.h). A rejection takes x out of p' and, when c_m > 0, its
// k + 1 nearest neighbours too: a deterministic tree zeroes them in p' and renormalises (a row
// left with no mass is uniform); a static tree subtracts q_x with those neighbours zeroed and
// renormalises (rounded to float32, as HostResidualDistribution).
//
// Nothing here is a loop over the walk. The residual at every draft's try is its parent row's
// after its earlier siblings were all rejected (they must be, for it to be tried), so the chain
// runs sibling rank by sibling rank for every row at once; a rejected draft costs 1 + (its second
// chance was open) numbers whatever its numbers; only an accepted draft's cost (1, or 2 when the
// second chance kept it) depends on its u1, so every draft's first number is found level by level
// from its parent's (max_depth rounds of a few operators). The path is where each draft and its
// ancestors are their parents' first kept child.
//
// Greedy (p the untempered ranking distribution): x is kept when it is the argmax of its
// parent's row with p(x) raised to p(x) + c_m, c_m pooled in that row; a draft that is the
// plain argmax needs no pooling and is not counted as pooled. Among kept siblings the one
// with the longest kept path below wins (the first on ties), and the next token is the argmax
// after the path.
#ifndef MULO_ENGINE_SAMPLING_RELAXED_TREE_REJECTION_H_
#define MULO_ENGINE_SAMPLING_RELAXED_TREE_REJECTION_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "engine/core/status.h"
#include "engine/sampling/pooling.h"
#include "engine/sampling/tree_rejection.h"

namespace mulo::engine {

struct RelaxedTreeCall {
  // The tree as JudgeTree takes it (a deterministic tree, or a static one with q, valid and
  // max_children); sampled, accept_uniforms holds 2 L numbers (a draft may use two).
  TreeCall tree;
  torch::Tensor table;  // int64 [V, max_neighbours]: the latent neighbour table, on p's device
  Pooling kind = Pooling::kAdditive;  // additive (LANTERN) or multiplicative (LANTERN++)
  int64_t k = 0;        // neighbours considered (PoolingRule::k), capped at the table
  // float64 [1] on p's device: delta (additive) or lambda - 1 (multiplicative).
  torch::Tensor bound;
};

// int64 [6 + max_depth] on p's device: JudgeTree's values (the kept path's length, the
// acceptance numbers used, the next token, the kept drafts root first, -1 after the path),
// then the relaxed accepts on the path as a mask (bit d: the path's draft at depth d + 1 was
// kept only thanks to the relaxation; depths past kMaxMaskedPlaces are not marked), the drafts
// pooled and the neighbours pooled.
torch::Tensor JudgeRelaxedTree(const RelaxedTreeCall& call);

inline constexpr int64_t kMaxMaskedPlaces = 62;  // the mask's bits in an int64

struct RelaxedTreeDecision {
  TreeDecision decision;
  std::vector<int64_t> relaxed;  // the path's drafts kept only thanks to the relaxation
  int64_t pooled_drafts = 0, pooled_neighbors = 0;
};
// JudgeRelaxedTree's values read to the host; INVALID_ARGUMENT when they are not 6 + max_depth
// of them or the path is out of range.
StatusOr<RelaxedTreeDecision> RelaxedTreeDecisionFromHost(const std::vector<int64_t>& values,
                                                          int64_t size, int64_t max_depth);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_RELAXED_TREE_REJECTION_H_
