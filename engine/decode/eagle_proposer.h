// The proposer of the tree methods (EAGLE-1 / EAGLE-2, later LANTERN and LANTERN++): the
// family's EAGLE-style head continues the target's features and grows a draft tree after the
// committed prefix.
//
// The head reads pairs (token x_j, the target feature f_j that predicted x_j) and predicts
// the next feature, which the target's output head turns into the drafter's logits (with the
// request's guidance: the head runs the target's batch, conditional and unconditional rows).
// Committed pairs stay in the head's KV cache; the tree's rows are appended while it grows,
// each node attending the committed pairs, its ancestors and itself, and are dropped before
// Propose returns.
//   Static tree (EAGLE-1, LANTERN++): the shape of StaticTree57 cut at the rows left; each
//     node's children are drawn without replacement from the head's distribution after it,
//     and each draft carries the q it was drawn from. One head forward per depth.
//   Dynamic tree (EAGLE-2): DeviceDynamicTree over the head's log-probabilities, one head
//     forward per expansion; drafts are deterministic (no q).
// Either tree grows on the device: tokens, distributions and the dynamic tree's scores stay
// where the head runs, and the finished tree is read once (a GPU drains its pipeline at every
// read; the host versions read once per depth).
#ifndef MULO_ENGINE_DECODE_EAGLE_PROPOSER_H_
#define MULO_ENGINE_DECODE_EAGLE_PROPOSER_H_

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/decode/device_dynamic_tree.h"
#include "engine/decode/draft_tree.h"
#include "engine/decode/dynamic_tree.h"
#include "engine/decode/eagle_tree_graphs.h"
#include "engine/decode/session.h"
#include "engine/model/eagle_head.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

struct TreeDraft {
  DraftBatch drafts;  // tokens, parents, q (static trees only)
  TreeShape shape;    // depths for the verify forward's positions
};

class EagleProposer {
 public:
  // `cache`: an empty cache of the head, of the target stream's batch (2 with guidance).
  EagleProposer(const EagleHead& head, const TokenModel& target, KvCache cache);

  // Queues the pairs of newly committed tokens and the target features [batch, tokens, dim]
  // that predicted them (one block: a step's path is a narrow of its verify output, queued
  // without a per-token view); Propose feeds the queue first.
  void Push(std::vector<int64_t> tokens, const torch::Tensor& features);

  // A tree at most `max_depth` deep after the committed prefix.
  StatusOr<TreeDraft> ProposeStatic(DecodeSession& session, int64_t max_depth);
  StatusOr<TreeDraft> ProposeDynamic(DecodeSession& session, const DynamicTreeOptions& options,
                                     int64_t max_depth);
  // The same dynamic tree left on the device, read by nobody: the step verifies it there and
  // reads the tree with its verdict (one read per step).
  StatusOr<DeviceDynamicTree::ChosenTree> ProposeDynamicOnDevice(
      DecodeSession& session, const DynamicTreeOptions& options, int64_t max_depth);
  // The static tree drawn by one replay of the worker's graphs (eagle_tree_graphs.h), left on
  // the device for the verify graphs; nullopt when the step does not fit them (nothing is fed
  // then: ProposeStatic grows it eagerly).
  StatusOr<std::optional<EagleTreeGraphs::Draft>> ProposeStaticOnGraphs(DecodeSession& session,
                                                                        int64_t max_depth);
  // Such a draft read once, as ProposeStatic returns its tree (for an eager verification).
  StatusOr<TreeDraft> ReadStatic(DecodeSession& session, const EagleTreeGraphs::Draft& draft) const;

 private:
  // The tree options cut to the rows left: at most max_depth - 1 expansions (the root's
  // children are one level).
  static DynamicTreeOptions Cut(const DynamicTreeOptions& options, int64_t max_depth);
  // A static tree of `shape` read once: its tokens, then whether each was drawn. Nodes left
  // undrawn (a distribution with fewer tokens than children, e.g. under top-k) are dropped with
  // their subtrees; `q` [nodes, V] keeps the kept drafts' rows.
  static StatusOr<TreeDraft> ReadStaticTree(DecodeSession& session, const TreeShape& shape,
                                            const torch::Tensor& tokens,
                                            const torch::Tensor& valid, const torch::Tensor& q);
  // The queued pairs handed to the graphs that fed them.
  void PairsFed();
  // The queued pairs' features [batch, pairs, dim]: the one block pushed since the last feed
  // as it is (no operator), else the blocks concatenated.
  torch::Tensor QueuedFeatures() const;
  // Grows the dynamic tree of `cut` options (the head's rows dropped after), unread.
  StatusOr<DeviceDynamicTree> GrowDynamic(DecodeSession& session, const DynamicTreeOptions& cut);
  // Feeds the queued pairs; returns the predicted feature after the last one [batch, dim].
  StatusOr<torch::Tensor> CatchUp(DecodeSession& session);
  // One head forward over m tree nodes, on the device: `tokens` int64 [m]; `parent_slot`
  // int64 [m], the slot of each node's parent (its predicted feature is the node's input;
  // -1 = the root, whose is `root_feature`); `attends` bool [m, tree_slots], the slots of its
  // ancestors. Each node attends the committed pairs, its ancestors and itself, and takes the
  // next slot (head cache row committed_rows_ + slot). Returns the predicted features
  // [batch, m, dim].
  StatusOr<torch::Tensor> FeedTreeNodes(DecodeSession& session, const torch::Tensor& tokens,
                                        const torch::Tensor& parent_slot,
                                        const torch::Tensor& attends,
                                        const torch::Tensor& root_feature);
  // A static tree's nodes while it grows, on the device until the tree is read: each one's
  // token, whether its parent's distribution had mass left for it, the distribution it was
  // drawn from ([nodes, V], made at the first draw).
  struct StaticTreeNodes {
    torch::Tensor tokens, valid, q;
  };
  // Draws the children of every node of `expanding` (-1 = the root) without replacement from
  // its row of `after` [expanding, V] into `nodes`.
  void DrawChildren(DecodeSession& session, const TreeShape& shape,
                    const std::vector<int64_t>& expanding, const torch::Tensor& after,
                    StaticTreeNodes* nodes) const;
  // The drafter's probabilities [m, V] from predicted features [batch, m, dim], on the device.
  torch::Tensor Probabilities(DecodeSession& session, const torch::Tensor& features) const;

  const EagleHead& head_;
  const TokenModel& target_;
  KvCache cache_;
  int64_t committed_rows_ = 0;  // head cache rows holding committed pairs
  std::vector<int64_t> queued_tokens_;
  std::vector<torch::Tensor> queued_features_;  // blocks [batch, k, dim], k tokens each
  torch::Tensor tree_features_;  // [batch, tree slots, dim]: the fed nodes' predictions
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_EAGLE_PROPOSER_H_
