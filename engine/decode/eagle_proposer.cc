#include "engine/decode/eagle_proposer.h"

#include <algorithm>

#include "engine/core/host_read.h"
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

EagleProposer::EagleProposer(const EagleHead& head, const Transformer& target, int64_t batch,
                             int64_t capacity)
    : head_(head), target_(target), cache_(head.NewCache(batch, capacity)) {}

void EagleProposer::Push(int64_t token, const torch::Tensor& feature) {
  queued_tokens_.push_back(token);
  queued_features_.push_back(feature);
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
                      {&cache_, embeddings, torch::stack(queued_features_, 1), torch::Tensor()}));
  ++session.stats().draft_forward_passes;
  committed_rows_ += m;
  queued_tokens_.clear();
  queued_features_.clear();
  return predicted.select(1, m - 1);
}

StatusOr<torch::Tensor> EagleProposer::FeedTreeNodes(DecodeSession& session,
                                                     const std::vector<int64_t>& nodes,
                                                     const std::vector<int64_t>& tokens,
                                                     const std::vector<int64_t>& parents,
                                                     const torch::Tensor& root_feature,
                                                     FedNodes* fed) {
  const int64_t m = static_cast<int64_t>(nodes.size()), rows = cache_.length();
  fed->head_row.resize(tokens.size(), -1);
  fed->predicted.resize(tokens.size());
  auto mask = torch::zeros({m, rows + m}, torch::kBool);
  mask.narrow(1, 0, committed_rows_).fill_(true);
  auto access = mask.accessor<bool, 2>();
  std::vector<int64_t> node_tokens;
  std::vector<torch::Tensor> inputs;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t parent = parents[nodes[i]];
    node_tokens.push_back(tokens[nodes[i]]);
    inputs.push_back(parent < 0 ? root_feature : fed->predicted[parent]);
    for (int64_t a = parent; a >= 0; a = parents[a]) access[i][fed->head_row[a]] = true;
    access[i][rows + i] = true;
  }
  MULO_ASSIGN_OR_RETURN(torch::Tensor embeddings,
                        target_.EmbedTokens(Ids(node_tokens, cache_.batch())));
  MULO_ASSIGN_OR_RETURN(torch::Tensor predicted,
                        session.RunHead(head_, {&cache_, embeddings, torch::stack(inputs, 1),
                                                mask.to(embeddings.device())}));
  ++session.stats().draft_forward_passes;
  for (int64_t i = 0; i < m; ++i) {
    fed->head_row[nodes[i]] = rows + i;
    fed->predicted[nodes[i]] = predicted.select(1, i);
  }
  return predicted;
}

torch::Tensor EagleProposer::Probabilities(DecodeSession& session,
                                           const torch::Tensor& features) const {
  torch::NoGradGuard no_grad;
  const auto logits = torch::linear(features, target_.output_weight()).to(torch::kFloat32);
  // Greedy verification only compares argmaxes, so a greedy tree is ranked by the head's
  // guided, untempered distribution and keeps its alternatives.
  return HostRead(session.RankingProbabilities(logits));
}

StatusOr<TreeDraft> EagleProposer::ProposeStatic(DecodeSession& session, int64_t max_depth) {
  MULO_ASSIGN_OR_RETURN(torch::Tensor root_feature, CatchUp(session));
  // The reference shape, cut where the image ends.
  const TreeShape full = StaticTree57();
  std::vector<int64_t> cut_parents, index(full.size(), -1);
  for (int64_t i = 0; i < full.size(); ++i) {
    if (full.depths[i] > max_depth) continue;
    index[i] = static_cast<int64_t>(cut_parents.size());
    cut_parents.push_back(full.parents[i] < 0 ? -1 : index[full.parents[i]]);
  }
  MULO_ASSIGN_OR_RETURN(TreeShape shape, TreeFromParents(cut_parents));
  const int64_t length = shape.size();
  std::vector<int64_t> tokens(length, -1);
  std::vector<torch::Tensor> q(length), after(length);
  FedNodes fed;
  const torch::Tensor root_q = Probabilities(session, root_feature.unsqueeze(1))[0];
  // Depth by depth: the nodes one level up whose children are drawn (the root first).
  std::vector<int64_t> expanding = {-1};
  for (int64_t depth = 1;; ++depth) {
    // Each expanding node's children, without replacement from the head's distribution.
    for (int64_t parent : expanding) {
      const std::vector<int64_t> children = shape.Children(parent);
      const SiblingDraws draws =
          DrawWithoutReplacement(parent < 0 ? root_q : after[parent],
                                 static_cast<int64_t>(children.size()),
                                 session.rng(RngStream::kDrafter), session.greedy());
      for (size_t r = 0; r < draws.tokens.size(); ++r) {
        tokens[children[r]] = draws.tokens[r];
        q[children[r]] = draws.q[r];
      }
    }
    // The head's distribution after every drawn node of this depth that has children.
    expanding.clear();
    for (int64_t i = 0; i < length; ++i) {
      if (shape.depths[i] == depth && tokens[i] >= 0 && !shape.Children(i).empty()) {
        expanding.push_back(i);
      }
    }
    if (expanding.empty()) break;
    MULO_ASSIGN_OR_RETURN(torch::Tensor out, FeedTreeNodes(session, expanding, tokens,
                                                           shape.parents, root_feature, &fed));
    const torch::Tensor probs = Probabilities(session, out);
    for (size_t j = 0; j < expanding.size(); ++j) {
      after[expanding[j]] = probs[static_cast<int64_t>(j)];
    }
  }
  MULO_RETURN_IF_ERROR(cache_.Truncate(committed_rows_));
  // Nodes left undrawn (a distribution with fewer tokens than children, e.g. under top-k)
  // are dropped with their subtrees.
  TreeDraft draft;
  std::vector<int64_t> kept_index(length, -1), kept_parents;
  std::vector<torch::Tensor> kept_q;
  for (int64_t i = 0; i < length; ++i) {
    if (tokens[i] < 0) continue;
    kept_index[i] = static_cast<int64_t>(kept_parents.size());
    kept_parents.push_back(shape.parents[i] < 0 ? -1 : kept_index[shape.parents[i]]);
    draft.drafts.tokens.push_back(tokens[i]);
    kept_q.push_back(q[i]);
  }
  MULO_ASSIGN_OR_RETURN(draft.shape, TreeFromParents(kept_parents));
  draft.drafts.parents = kept_parents;
  draft.drafts.q = torch::stack(kept_q);
  return draft;
}

StatusOr<TreeDraft> EagleProposer::ProposeDynamic(DecodeSession& session,
                                                  const DynamicTreeOptions& options,
                                                  int64_t max_depth) {
  MULO_ASSIGN_OR_RETURN(torch::Tensor root_feature, CatchUp(session));
  DynamicTreeOptions cut = options;
  cut.depth = std::min(options.depth, max_depth - 1);
  DynamicTreeBuilder builder(cut);
  builder.Start(Probabilities(session, root_feature.unsqueeze(1))[0].log());
  FedNodes fed;
  while (builder.expansions_left() > 0) {
    MULO_ASSIGN_OR_RETURN(torch::Tensor out,
                          FeedTreeNodes(session, builder.frontier(), builder.tokens(),
                                        builder.parents(), root_feature, &fed));
    builder.Expand(Probabilities(session, out).log());
  }
  MULO_RETURN_IF_ERROR(cache_.Truncate(committed_rows_));
  DynamicTreeBuilder::Chosen chosen = builder.Finish();
  TreeDraft draft;
  draft.drafts.tokens = chosen.tokens;
  draft.drafts.parents = chosen.shape.parents;
  draft.shape = std::move(chosen.shape);
  return draft;
}

}  // namespace mulo::engine
