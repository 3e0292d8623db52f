#include "engine/decode/eagle_proposer.h"

#include <algorithm>

#include "engine/core/device_upload.h"
#include "engine/decode/eagle_tree_graphs.h"
#include "engine/decode/kv_pools.h"
#include "engine/sampling/without_replacement.h"

namespace mulo::engine {
namespace {

// Token ids as the target's embedding expects them: [batch, n].
torch::Tensor Ids(const std::vector<int64_t>& tokens, int64_t batch) {
  return torch::tensor(tokens, torch::kInt64)
      .unsqueeze(0)
      .expand({batch, static_cast<int64_t>(tokens.size())})
      .contiguous();
}

}  // namespace

EagleProposer::EagleProposer(const EagleHead& head, const TokenModel& target, KvCache cache)
    : head_(head), target_(target), cache_(std::move(cache)) {}

void EagleProposer::Push(std::vector<int64_t> tokens, const torch::Tensor& features) {
  if (tokens.empty()) return;
  queued_tokens_.insert(queued_tokens_.end(), tokens.begin(), tokens.end());
  queued_features_.push_back(features);
}

torch::Tensor EagleProposer::QueuedFeatures() const {
  return queued_features_.size() == 1 ? queued_features_.front()
                                      : torch::cat(queued_features_, 1);
}

StatusOr<torch::Tensor> EagleProposer::CatchUp(DecodeSession& session) {
  if (queued_tokens_.empty()) {
    return FailedPreconditionError("EagleProposer: no committed pair to continue from");
  }
  const int64_t m = static_cast<int64_t>(queued_tokens_.size());
  MULO_ASSIGN_OR_RETURN(torch::Tensor embeddings,
                        target_.EmbedTokens(Ids(queued_tokens_, cache_.batch())));
  MULO_ASSIGN_OR_RETURN(
      torch::Tensor predicted,
      session.RunHead(head_,
                      {&cache_, embeddings, QueuedFeatures(), torch::Tensor()}));
  ++session.stats().draft_forward_passes;
  committed_rows_ += m;
  queued_tokens_.clear();
  queued_features_.clear();
  return predicted.select(1, m - 1);
}

StatusOr<torch::Tensor> EagleProposer::FeedTreeNodes(DecodeSession& session,
                                                     const torch::Tensor& tokens,
                                                     const torch::Tensor& parent_slot,
                                                     const torch::Tensor& attends,
                                                     const torch::Tensor& root_feature) {
  const int64_t m = tokens.size(0), slots = attends.size(1);
  if (cache_.length() != committed_rows_ + slots) {
    return InternalError("EagleProposer: the head's cache has " +
                         std::to_string(cache_.length()) + " rows, expected " +
                         std::to_string(committed_rows_ + slots));
  }
  const torch::Device device = root_feature.device();
  const auto flags = torch::TensorOptions().dtype(torch::kBool).device(device);
  // Each node attends the committed pairs, its ancestors' slots and itself.
  const torch::Tensor mask = torch::cat(
      {torch::ones({m, committed_rows_}, flags), Upload(attends, device), torch::eye(m, flags)}, 1);
  // Input features: the root's prediction (index 0), then every fed slot's.
  torch::Tensor features = root_feature.unsqueeze(1);
  if (tree_features_.defined()) features = torch::cat({features, tree_features_}, 1);
  const torch::Tensor inputs = features.index_select(1, Upload(parent_slot, device) + 1);
  MULO_ASSIGN_OR_RETURN(
      torch::Tensor embeddings,
      target_.EmbedDrawnTokens(tokens.unsqueeze(0).expand({cache_.batch(), m}).contiguous()));
  MULO_ASSIGN_OR_RETURN(torch::Tensor predicted,
                        session.RunHead(head_, {&cache_, embeddings, inputs, mask}));
  ++session.stats().draft_forward_passes;
  tree_features_ =
      tree_features_.defined() ? torch::cat({tree_features_, predicted}, 1) : predicted;
  return predicted;
}

torch::Tensor EagleProposer::Probabilities(DecodeSession& session,
                                           const torch::Tensor& features) const {
  at::NoGradGuard no_grad;
  const auto logits = target_.HeadLogits(features);
  // Greedy verification only compares argmaxes, so a greedy tree is ranked by the head's
  // guided, untempered distribution and keeps its alternatives.
  return session.RankingProbabilities(logits);
}

void EagleProposer::DrawChildren(DecodeSession& session, const TreeShape& shape,
                                 const std::vector<int64_t>& expanding,
                                 const torch::Tensor& after, StaticTreeNodes* nodes) const {
  const auto ints = nodes->tokens.options();
  // All parents at once; the numbers are the drafter stream's next ones, parent by parent,
  // child by child (the host loop's order).
  const int64_t parents = static_cast<int64_t>(expanding.size());
  int64_t widest = 0, drawn = 0;
  for (int64_t parent : expanding) {
    widest = std::max<int64_t>(widest, shape.Children(parent).size());
  }
  std::vector<int64_t> number_of(parents * widest, 0), from, to;
  for (int64_t p = 0; p < parents; ++p) {
    const std::vector<int64_t> children = shape.Children(expanding[p]);
    for (size_t r = 0; r < children.size(); ++r) {
      number_of[p * widest + static_cast<int64_t>(r)] = drawn++;
      from.push_back(p * widest + static_cast<int64_t>(r));
      to.push_back(children[r]);
    }
  }
  const torch::Tensor numbers = session.DrawNumbers(RngStream::kDrafter, drawn);
  const torch::Tensor uniforms =
      numbers.defined()
          ? numbers.index_select(0, torch::tensor(number_of, ints)).view({parents, widest})
          : torch::Tensor();
  const SiblingDrawsOnDevice draws =
      DrawSiblingsOnDevice(after, widest, uniforms, session.greedy());
  const torch::Tensor from_rows = torch::tensor(from, ints), to_nodes = torch::tensor(to, ints);
  if (!nodes->q.defined()) {
    nodes->q = torch::zeros({nodes->tokens.size(0), after.size(1)}, after.options());
  }
  nodes->tokens.index_copy_(0, to_nodes, draws.tokens.flatten().index_select(0, from_rows));
  nodes->valid.index_copy_(0, to_nodes, draws.valid.flatten().index_select(0, from_rows));
  nodes->q.index_copy_(
      0, to_nodes, draws.q.flatten(0, 1).index_select(0, from_rows).to(nodes->q.scalar_type()));
}

StatusOr<TreeDraft> EagleProposer::ProposeStatic(DecodeSession& session, int64_t max_depth) {
  MULO_ASSIGN_OR_RETURN(torch::Tensor root_feature, CatchUp(session));
  tree_features_ = torch::Tensor();
  // The reference shape, cut where the image ends.
  const TreeShape shape = StaticTree57Cut(max_depth);
  const int64_t length = shape.size();
  const torch::Device device = root_feature.device();
  const auto ints = torch::TensorOptions().dtype(torch::kInt64).device(device);
  StaticTreeNodes nodes{torch::zeros({length}, ints),
                        torch::zeros({length}, ints.dtype(torch::kBool)), torch::Tensor()};
  std::vector<int64_t> slot(length, -1);
  int64_t slots = 0;
  // Depth by depth: the nodes one level up whose children are drawn (the root first) and the
  // head's distributions after them, one row each.
  std::vector<int64_t> expanding = {-1};
  torch::Tensor after = Probabilities(session, root_feature.unsqueeze(1));
  for (int64_t depth = 1;; ++depth) {
    DrawChildren(session, shape, expanding, after, &nodes);
    // The head's distribution after every node of this depth that has children. A node whose
    // draw found no mass is fed too (its subtree is dropped below): the host never waits.
    expanding.clear();
    for (int64_t i = 0; i < length; ++i) {
      if (shape.depths[i] == depth && !shape.Children(i).empty()) expanding.push_back(i);
    }
    if (expanding.empty()) break;
    const int64_t m = static_cast<int64_t>(expanding.size());
    std::vector<int64_t> parent_slot;
    auto attends = torch::zeros({m, slots}, torch::kBool);
    auto attend = attends.accessor<bool, 2>();
    for (int64_t j = 0; j < m; ++j) {
      const int64_t parent = shape.parents[expanding[j]];
      parent_slot.push_back(parent < 0 ? -1 : slot[parent]);
      for (int64_t a = parent; a >= 0; a = shape.parents[a]) attend[j][slot[a]] = true;
    }
    MULO_ASSIGN_OR_RETURN(
        torch::Tensor out,
        FeedTreeNodes(session, nodes.tokens.index_select(0, torch::tensor(expanding, ints)),
                      torch::tensor(parent_slot, torch::kInt64), attends, root_feature));
    for (int64_t j = 0; j < m; ++j) slot[expanding[j]] = slots + j;
    slots += m;
    after = Probabilities(session, out);
  }
  MULO_RETURN_IF_ERROR(cache_.Truncate(committed_rows_));
  tree_features_ = torch::Tensor();
  return ReadStaticTree(session, shape, nodes.tokens, nodes.valid, nodes.q);
}

StatusOr<TreeDraft> EagleProposer::ReadStaticTree(DecodeSession& session, const TreeShape& shape,
                                                  const torch::Tensor& tokens,
                                                  const torch::Tensor& valid,
                                                  const torch::Tensor& q) {
  const int64_t length = shape.size();
  // The tree's one read.
  MULO_ASSIGN_OR_RETURN(const std::vector<int64_t> host,
                        session.ReadIds(torch::cat({tokens, valid.to(torch::kInt64)})));
  TreeDraft draft;
  std::vector<int64_t> kept_index(length, -1), kept_parents, kept_nodes;
  for (int64_t i = 0; i < length; ++i) {
    const int64_t parent = shape.parents[i];
    if (host[length + i] == 0 || (parent >= 0 && kept_index[parent] < 0)) continue;
    kept_index[i] = static_cast<int64_t>(kept_parents.size());
    kept_parents.push_back(parent < 0 ? -1 : kept_index[parent]);
    kept_nodes.push_back(i);
    draft.drafts.tokens.push_back(host[i]);
  }
  MULO_ASSIGN_OR_RETURN(draft.shape, TreeFromParents(kept_parents));
  draft.drafts.parents = kept_parents;
  draft.drafts.q = q.index_select(
      0, torch::tensor(kept_nodes, torch::dtype(torch::kInt64).device(q.device())));
  return draft;
}

StatusOr<std::optional<EagleTreeGraphs::Draft>> EagleProposer::ProposeStaticOnGraphs(
    DecodeSession& session, int64_t max_depth) {
  const int64_t depth = std::min(max_depth, StaticTree57().max_depth());
  const bool greedy = session.greedy();
  const EagleTreeGraphs* graphs =
      session.reservation() != nullptr
          ? session.reservation()->StaticTreeGraphsOf(head_, depth, greedy)
          : nullptr;
  const int64_t pairs = static_cast<int64_t>(queued_tokens_.size());
  if (graphs == nullptr || !graphs->FitsStatic(cache_, pairs, depth, session.sampling())) {
    return std::optional<EagleTreeGraphs::Draft>();
  }
  EagleTreeGraphs::Call call{&cache_, queued_tokens_, QueuedFeatures(),
                             session.sampling()};
  // The drafter stream's numbers for every node at once: the ones ProposeStatic draws level
  // by level, in the same order.
  if (!greedy) call.numbers = session.DrawNumbers(RngStream::kDrafter, StaticTree57Cut(depth).size());
  // Inside the loop's next batch of drafting replays when the request has a loop.
  MULO_ASSIGN_OR_RETURN(EagleTreeGraphs::Draft draft, session.DraftTree(*graphs, call));
  session.stats().draft_forward_passes += draft.head_forwards;
  PairsFed();
  return std::optional<EagleTreeGraphs::Draft>(std::move(draft));
}

StatusOr<TreeDraft> EagleProposer::ReadStatic(DecodeSession& session,
                                              const EagleTreeGraphs::Draft& draft) const {
  return ReadStaticTree(session, StaticTree57Cut(draft.tree.max_depth), draft.tree.tokens,
                        draft.valid, draft.q);
}

void EagleProposer::PairsFed() {
  committed_rows_ += static_cast<int64_t>(queued_tokens_.size());
  queued_tokens_.clear();
  queued_features_.clear();
}

DynamicTreeOptions EagleProposer::Cut(const DynamicTreeOptions& options, int64_t max_depth) {
  DynamicTreeOptions cut = options;
  cut.depth = std::min(options.depth, max_depth - 1);
  return cut;
}

StatusOr<DeviceDynamicTree> EagleProposer::GrowDynamic(DecodeSession& session,
                                                       const DynamicTreeOptions& cut) {
  MULO_ASSIGN_OR_RETURN(torch::Tensor root_feature, CatchUp(session));
  tree_features_ = torch::Tensor();
  DeviceDynamicTree tree(cut);
  tree.Start(Probabilities(session, root_feature.unsqueeze(1))[0].log());
  while (tree.expansions_left() > 0) {
    const DeviceDynamicTree::Feed feed = tree.NextFeed();
    MULO_ASSIGN_OR_RETURN(torch::Tensor out, FeedTreeNodes(session, feed.tokens,
                                                           feed.parent_slot, feed.attends,
                                                           root_feature));
    tree.Expand(Probabilities(session, out).log());
  }
  MULO_RETURN_IF_ERROR(cache_.Truncate(committed_rows_));
  tree_features_ = torch::Tensor();
  return tree;
}

StatusOr<TreeDraft> EagleProposer::ProposeDynamic(DecodeSession& session,
                                                  const DynamicTreeOptions& options,
                                                  int64_t max_depth) {
  MULO_ASSIGN_OR_RETURN(DeviceDynamicTree tree, GrowDynamic(session, Cut(options, max_depth)));
  // The one read of the tree, batched with other requests' in an engine loop.
  MULO_ASSIGN_OR_RETURN(torch::Tensor chosen_on_device, tree.ChosenOnDevice());
  MULO_ASSIGN_OR_RETURN(std::vector<int64_t> chosen_ids, session.ReadIds(chosen_on_device));
  MULO_ASSIGN_OR_RETURN(DynamicTreeBuilder::Chosen chosen, tree.ChosenFromHost(chosen_ids));
  TreeDraft draft;
  draft.drafts.tokens = chosen.tokens;
  draft.drafts.parents = chosen.shape.parents;
  draft.shape = std::move(chosen.shape);
  return draft;
}

StatusOr<DeviceDynamicTree::ChosenTree> EagleProposer::ProposeDynamicOnDevice(
    DecodeSession& session, const DynamicTreeOptions& options, int64_t max_depth) {
  // From the worker's graphs of the whole drafting step when the step fits them: one replay.
  const DynamicTreeOptions cut = Cut(options, max_depth);
  const EagleTreeGraphs* graphs = session.reservation() != nullptr
                                      ? session.reservation()->TreeGraphsOf(head_, cut)
                                      : nullptr;
  const int64_t pairs = static_cast<int64_t>(queued_tokens_.size());
  if (graphs != nullptr && graphs->Fits(cache_, pairs, cut, session.sampling())) {
    // Inside the loop's next batch of drafting replays when the request has a loop.
    MULO_ASSIGN_OR_RETURN(
        EagleTreeGraphs::Draft draft,
        session.DraftTree(*graphs, {&cache_, queued_tokens_, QueuedFeatures(), session.sampling(),
                                    /*numbers=*/torch::Tensor(), cut}));
    session.stats().draft_forward_passes += draft.head_forwards;
    PairsFed();
    return std::move(draft.tree);
  }
  MULO_ASSIGN_OR_RETURN(DeviceDynamicTree tree, GrowDynamic(session, cut));
  return tree.ChosenTreeOnDevice();
}

}  // namespace mulo::engine
