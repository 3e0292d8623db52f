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
//   Dynamic tree (EAGLE-2): DynamicTreeBuilder over the head's log-probabilities, one head
//     forward per expansion; drafts are deterministic (no q).
#ifndef MULO_ENGINE_DECODE_EAGLE_PROPOSER_H_
#define MULO_ENGINE_DECODE_EAGLE_PROPOSER_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "engine/decode/draft_tree.h"
#include "engine/decode/dynamic_tree.h"
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
  // `batch`: the target stream's batch (2 with guidance); `capacity`: head cache rows.
  EagleProposer(const EagleHead& head, const Transformer& target, int64_t batch,
                int64_t capacity);

  // Queues the pair of a newly committed token and the target feature [batch, dim] that
  // predicted it; Propose feeds the queue first.
  void Push(int64_t token, const torch::Tensor& feature);

  // A tree at most `max_depth` deep after the committed prefix.
  StatusOr<TreeDraft> ProposeStatic(DecodeSession& session, int64_t max_depth);
  StatusOr<TreeDraft> ProposeDynamic(DecodeSession& session, const DynamicTreeOptions& options,
                                     int64_t max_depth);

 private:
  // Feeds the queued pairs; returns the predicted feature after the last one [batch, dim].
  StatusOr<torch::Tensor> CatchUp(DecodeSession& session);
  // The head rows and predicted features [batch, dim] of the tree nodes fed so far, indexed
  // like the caller's node arrays.
  struct FedNodes {
    std::vector<int64_t> head_row;
    std::vector<torch::Tensor> predicted;
  };
  // One head forward over `nodes` (indices into tokens / parents; their parents are fed
  // already, or are the root): each node's input feature is its parent's predicted one
  // (`root_feature` for the root's children), and it attends the committed pairs, its
  // ancestors' head rows and itself. Records the nodes in `fed`; returns their predicted
  // features [batch, nodes, dim].
  StatusOr<torch::Tensor> FeedTreeNodes(DecodeSession& session, const std::vector<int64_t>& nodes,
                                        const std::vector<int64_t>& tokens,
                                        const std::vector<int64_t>& parents,
                                        const torch::Tensor& root_feature, FedNodes* fed);
  // The drafter's probabilities [m, V] from predicted features [batch, m, dim].
  torch::Tensor Probabilities(DecodeSession& session, const torch::Tensor& features) const;

  const EagleHead& head_;
  const Transformer& target_;
  KvCache cache_;
  int64_t committed_rows_ = 0;  // head cache rows holding committed pairs
  std::vector<int64_t> queued_tokens_;
  std::vector<torch::Tensor> queued_features_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_EAGLE_PROPOSER_H_
