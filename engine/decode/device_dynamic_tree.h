// EAGLE-2's dynamic draft tree grown where the drafter's distributions are, with no host read
// until the tree is chosen: the same rules as DynamicTreeBuilder (dynamic_tree.h), which stays
// as its test oracle, as tensor ops.
//
// Why: the host builder reads the drafter's distribution back at every expansion, a full
// pipeline drain per tree depth on a GPU (EAGLE-2 read 8.9 times per decode step). Here the
// scores, the frontier's selection (a stable sort, so ties keep creation order as the host's
// stable_sort does) and the chosen tree stay on the device; Finish reads the chosen tokens and
// parents once.
//
// The head feeds each frontier in one masked forward; the frontier's nodes take the next
// `frontier_size()` tree slots (the head's cache rows after the committed pairs), and NextFeed
// says, for each, its parent's slot (whose predicted feature is its input) and the slots it
// attends (its ancestors').
#ifndef MULO_ENGINE_DECODE_DEVICE_DYNAMIC_TREE_H_
#define MULO_ENGINE_DECODE_DEVICE_DYNAMIC_TREE_H_

#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/dynamic_tree.h"

namespace mulo::engine {

class DeviceDynamicTree {
 public:
  // `width` undefined: the tree of `options`. Defined (int64 [1] on the device, 1 .. top_k):
  // the tree of width `width` grown in shapes padded to options.top_k, so that one CUDA graph
  // grows every width up to it (PEANUT's steps, whose width moves every step;
  // eagle_tree_graphs.h). Every row records top_k children and every frontier holds top_k
  // nodes, but only a real row's best `width` children, and a frontier's best `width` real
  // candidates, are real; the others are never expanded (their children are not real) and
  // never chosen (real nodes sort first), so the chosen tree is the unpadded one's node for
  // node. options.total_tokens must then be the unpadded tree's chosen count (ChosenNodes).
  explicit DeviceDynamicTree(DynamicTreeOptions options, torch::Tensor width = {})
      : options_(options), width_(std::move(width)) {}

  // log_probs: [V], the drafter's log-distribution after the committed prefix.
  void Start(const torch::Tensor& log_probs);

  // What the head needs to feed the frontier, on the tree's device.
  struct Feed {
    torch::Tensor tokens;       // int64 [F]
    torch::Tensor parent_slot;  // int64 [F]: the parent's slot, -1 for the root's children
    torch::Tensor attends;      // bool [F, slots_fed()]: the ancestors' slots
  };
  Feed NextFeed() const;
  // After the frontier was fed (its nodes took slots slots_fed() ..): log_probs [F, V], row i
  // after frontier node i.
  void Expand(const torch::Tensor& log_probs);

  int64_t frontier_size() const { return frontier_size_; }
  int64_t slots_fed() const { return slots_fed_; }
  int64_t expansions_left() const { return options_.depth - expansions_; }

  // The chosen tree, as DynamicTreeBuilder::Finish gives it (nodes: recorded ids), in two
  // halves so that the one host read between them can go where the caller's reads go (a
  // request's engine loop batches it with other requests'): the chosen nodes, their tokens
  // and their parents (re-indexed into the chosen list), as one int64 tensor on the device;
  // then the tree from those values read to the host.
  StatusOr<torch::Tensor> ChosenOnDevice() const;
  StatusOr<DynamicTreeBuilder::Chosen> ChosenFromHost(const std::vector<int64_t>& host) const;
  // Both, reading at once.
  StatusOr<DynamicTreeBuilder::Chosen> Finish() const;

  // The chosen tree left on the device for a verification there (EAGLE-2's one-read step):
  // what the target's tree forward and the device verifier (tree_rejection.h) take.
  struct ChosenTree {
    torch::Tensor tokens;     // int64 [L]
    torch::Tensor parents;    // int64 [L]: indices into the chosen list, -1 = the root
    torch::Tensor depths;     // int64 [L]: 1 for the root's children
    torch::Tensor ancestors;  // bool [L, L]: row i, node i's ancestors and node i itself
    int64_t max_depth = 0;    // the tree's levels at most (the root's children, one per expansion)

    // Whether the tensors are views of a graph's outputs (EagleTreeGraphs::Run), which its next
    // replay rewrites.
    bool borrowed = false;

    int64_t size() const { return tokens.size(0); }
    // The same tree in tensors of its own (itself unless borrowed): a step that yields to the
    // engine loop before it is done with a borrowed tree copies it first.
    ChosenTree Owned() const;
  };
  StatusOr<ChosenTree> ChosenTreeOnDevice() const;

 private:
  // Records the top-k children of every row of `log_probs` [R, V] under the parents `parent`
  // (int64 [R], -1 = root) with base scores `base` (float64 [R]), row by row in rank order as
  // the host builder does; returns how many each row got.
  // Padded: `row_real` (bool [R]) says which rows are real nodes'.
  int64_t Record(const torch::Tensor& log_probs, const torch::Tensor& parent,
                 const torch::Tensor& base, const torch::Tensor& row_real = {});
  // The first `keep` of `scores` [n] (the recorded nodes from `first` on) by descending score,
  // ties in index order, put back in index order (the host builder's std::stable_sort).
  // Padded: real nodes first, and `*real` (when given) says which kept ones are among the
  // `width` best real ones.
  torch::Tensor Best(const torch::Tensor& scores, int64_t first, int64_t keep,
                     torch::Tensor* real) const;

  DynamicTreeOptions options_;
  torch::Tensor width_;  // padded trees: the real width, int64 [1]; undefined otherwise
  int64_t expansions_ = 0, frontier_size_ = 0, slots_fed_ = 0, max_slots_ = 0;
  // Every recorded node (creation order): token, parent (-1 = root), cumulative log-prob.
  torch::Tensor tokens_, parents_, scores_;
  torch::Tensor frontier_;              // int64 [F] node ids, creation order
  torch::Tensor frontier_parent_slot_;  // int64 [F]: each one's parent's slot, -1 = the root
  torch::Tensor frontier_ancestors_;    // bool [F, max_slots]: the slots of each one's ancestors
  torch::Tensor real_, frontier_real_;  // padded: bool, which recorded / frontier nodes are real
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_DEVICE_DYNAMIC_TREE_H_
