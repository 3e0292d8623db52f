#include "engine/decode/device_dynamic_tree.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/sampling/tree_rejection.h"

namespace mulo::engine {
namespace {

torch::Tensor Arange(int64_t n, const torch::Tensor& like) {
  return torch::arange(n, like.options().dtype(torch::kInt64));
}

}  // namespace

int64_t DeviceDynamicTree::Record(const torch::Tensor& log_probs, const torch::Tensor& parent,
                                  const torch::Tensor& base, const torch::Tensor& row_real) {
  const int64_t rows = log_probs.size(0);
  const int64_t k = std::min<int64_t>(options_.top_k, log_probs.size(1));
  const auto top = log_probs.to(torch::kFloat64).topk(k, /*dim=*/1);
  tokens_ = torch::cat({tokens_, std::get<1>(top).flatten()});
  parents_ = torch::cat({parents_, parent.unsqueeze(1).expand({rows, k}).flatten()});
  scores_ = torch::cat({scores_, (base.unsqueeze(1) + std::get<0>(top)).flatten()});
  if (width_.defined()) {  // a real row's best `width` children are real
    const torch::Tensor real = row_real.unsqueeze(1) & (Arange(k, tokens_) < width_).unsqueeze(0);
    real_ = torch::cat({real_, real.flatten()});
  }
  return k;
}

torch::Tensor DeviceDynamicTree::Best(const torch::Tensor& scores, int64_t first, int64_t keep,
                                      torch::Tensor* real) const {
  torch::Tensor order = std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  if (width_.defined()) {
    // Real nodes first, each part still by score: a stable sort of the score order.
    const torch::Tensor is_real = real_.narrow(0, first, scores.size(0)).index_select(0, order);
    order = order.index_select(0, std::get<1>(is_real.to(torch::kInt32).sort(
                                      /*stable=*/true, /*dim=*/0, /*descending=*/true)));
  }
  const torch::Tensor kept = order.narrow(0, 0, keep);
  const auto in_index_order = kept.sort();
  if (width_.defined() && real != nullptr) {
    // Rank r of the kept is real when it is a real node among the best `width`.
    const torch::Tensor ranked_real =
        (Arange(keep, kept) < width_) &
        real_.narrow(0, first, scores.size(0)).index_select(0, kept);
    *real = ranked_real.index_select(0, std::get<1>(in_index_order));
  }
  return std::get<0>(in_index_order);
}

void DeviceDynamicTree::Start(const torch::Tensor& log_probs) {
  at::NoGradGuard no_grad;
  const auto ints = log_probs.options().dtype(torch::kInt64);
  tokens_ = torch::zeros({0}, ints);
  parents_ = torch::zeros({0}, ints);
  scores_ = torch::zeros({0}, ints.dtype(torch::kFloat64));
  if (width_.defined()) real_ = torch::zeros({0}, ints.dtype(torch::kBool));
  expansions_ = slots_fed_ = 0;
  // Every expansion feeds at most top_k nodes (the root's children are at most top_k too).
  max_slots_ = std::max<int64_t>(1, options_.depth) * options_.top_k;
  const int64_t k = Record(log_probs.unsqueeze(0), torch::full({1}, -1, ints),
                           torch::zeros({1}, ints.dtype(torch::kFloat64)),
                           torch::ones({1}, ints.dtype(torch::kBool)));
  frontier_ = Arange(k, tokens_);
  if (width_.defined()) frontier_real_ = real_;  // the root's best `width` children
  frontier_size_ = k;
  frontier_parent_slot_ = torch::full({k}, -1, ints);
  frontier_ancestors_ = torch::zeros({k, max_slots_}, ints.dtype(torch::kBool));
}

DeviceDynamicTree::Feed DeviceDynamicTree::NextFeed() const {
  at::NoGradGuard no_grad;
  Feed feed;
  feed.tokens = tokens_.index_select(0, frontier_);
  feed.parent_slot = frontier_parent_slot_;
  feed.attends = frontier_ancestors_.narrow(1, 0, slots_fed_);
  return feed;
}

void DeviceDynamicTree::Expand(const torch::Tensor& log_probs) {
  at::NoGradGuard no_grad;
  // The frontier was fed: frontier node j holds slot base + j, and its children attend it.
  const int64_t base = slots_fed_;
  slots_fed_ += frontier_size_;
  const int64_t first = tokens_.size(0);
  const int64_t k =
      Record(log_probs, frontier_, scores_.index_select(0, frontier_), frontier_real_);
  const int64_t candidates = frontier_size_ * k;
  // The global top_k of the candidates by cumulative score, in creation order.
  const int64_t keep = std::min<int64_t>(options_.top_k, candidates);
  const torch::Tensor chosen =
      Best(scores_.narrow(0, first, candidates), first, keep, &frontier_real_);
  frontier_ = first + chosen;
  // Candidate c is child c / k of the fed frontier's row c / k: its parent's slot, and its
  // ancestors are its parent's and the parent itself.
  const torch::Tensor parent_row = chosen.div(k, "floor");
  frontier_parent_slot_ = parent_row + base;
  frontier_ancestors_ = frontier_ancestors_.index_select(0, parent_row)
                            .scatter_(1, frontier_parent_slot_.unsqueeze(1), true);
  frontier_size_ = keep;
  ++expansions_;
}

StatusOr<torch::Tensor> DeviceDynamicTree::ChosenOnDevice() const {
  return GuardTorch("DeviceDynamicTree::ChosenOnDevice", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    const int64_t recorded = tokens_.size(0);
    const int64_t total = std::min<int64_t>(options_.total_tokens, recorded);
    const torch::Tensor chosen = Best(scores_, 0, total, nullptr);
    // Parents re-indexed into the chosen list (a chosen node's parent is chosen: it scores at
    // least as much and was created earlier).
    const torch::Tensor index_of =
        torch::full({recorded}, -1, chosen.options()).index_put_({chosen}, Arange(total, chosen));
    const torch::Tensor parent = parents_.index_select(0, chosen);
    const torch::Tensor chosen_parent = torch::where(parent < 0, torch::full_like(parent, -1),
                                                     index_of.index_select(0, parent.clamp_min(0)));
    return torch::cat({chosen, tokens_.index_select(0, chosen), chosen_parent});
  });
}

DeviceDynamicTree::ChosenTree DeviceDynamicTree::ChosenTree::Owned() const {
  if (!borrowed) return *this;  // the eager tree's own tensors: nothing to copy
  ChosenTree owned = *this;
  owned.borrowed = false;
  owned.tokens = tokens.clone();
  owned.parents = parents.clone();
  owned.depths = depths.clone();
  owned.ancestors = ancestors.clone();
  return owned;
}

StatusOr<DeviceDynamicTree::ChosenTree> DeviceDynamicTree::ChosenTreeOnDevice() const {
  MULO_ASSIGN_OR_RETURN(torch::Tensor chosen, ChosenOnDevice());
  return GuardTorch("DeviceDynamicTree::ChosenTreeOnDevice", [&]() -> StatusOr<ChosenTree> {
    at::NoGradGuard no_grad;
    const int64_t total = chosen.size(0) / 3;
    ChosenTree tree;
    tree.tokens = chosen.narrow(0, total, total);
    tree.parents = chosen.narrow(0, 2 * total, total);
    tree.max_depth = expansions_ + 1;
    tree.ancestors = TreeAncestors(tree.parents, tree.max_depth);
    tree.depths = tree.ancestors.sum(1);
    return tree;
  });
}

StatusOr<DynamicTreeBuilder::Chosen> DeviceDynamicTree::ChosenFromHost(
    const std::vector<int64_t>& host) const {
  const int64_t total = std::min<int64_t>(options_.total_tokens, tokens_.size(0));
  if (static_cast<int64_t>(host.size()) != 3 * total) {
    return InvalidArgumentError(
        "DeviceDynamicTree::ChosenFromHost: " + std::to_string(host.size()) + " values for " +
        std::to_string(total) + " chosen nodes (expected 3 per node)");
  }
  DynamicTreeBuilder::Chosen out;
  out.nodes.assign(host.begin(), host.begin() + total);
  out.tokens.assign(host.begin() + total, host.begin() + 2 * total);
  std::vector<int64_t> parents(host.begin() + 2 * total, host.end());
  MULO_ASSIGN_OR_RETURN(out.shape, TreeFromParents(parents));
  return out;
}

StatusOr<DynamicTreeBuilder::Chosen> DeviceDynamicTree::Finish() const {
  MULO_ASSIGN_OR_RETURN(torch::Tensor ids, ChosenOnDevice());
  return GuardTorch("DeviceDynamicTree::Finish", [&]() -> StatusOr<DynamicTreeBuilder::Chosen> {
    return ChosenFromHost(HostReadIds(ids));
  });
}

}  // namespace mulo::engine
