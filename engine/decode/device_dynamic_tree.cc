#include "engine/decode/device_dynamic_tree.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"

namespace mulo::engine {
namespace {

torch::Tensor Arange(int64_t n, const torch::Tensor& like) {
  return torch::arange(n, like.options().dtype(torch::kInt64));
}

// The first `keep` indices of `scores` by descending score, ties in index order (what
// std::stable_sort with `>` gives the host builder), put back in index order.
torch::Tensor BestInIndexOrder(const torch::Tensor& scores, int64_t keep) {
  const torch::Tensor order =
      std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  return std::get<0>(order.narrow(0, 0, keep).sort());
}

}  // namespace

int64_t DeviceDynamicTree::Record(const torch::Tensor& log_probs, const torch::Tensor& parent,
                                  const torch::Tensor& base) {
  const int64_t rows = log_probs.size(0);
  const int64_t k = std::min<int64_t>(options_.top_k, log_probs.size(1));
  const auto top = log_probs.to(torch::kFloat64).topk(k, /*dim=*/1);
  tokens_ = torch::cat({tokens_, std::get<1>(top).flatten()});
  parents_ = torch::cat({parents_, parent.unsqueeze(1).expand({rows, k}).flatten()});
  scores_ = torch::cat({scores_, (base.unsqueeze(1) + std::get<0>(top)).flatten()});
  slot_ = torch::cat({slot_, torch::full({rows * k}, -1, parents_.options())});
  return k;
}

void DeviceDynamicTree::Start(const torch::Tensor& log_probs) {
  torch::NoGradGuard no_grad;
  const auto ints = log_probs.options().dtype(torch::kInt64);
  tokens_ = torch::zeros({0}, ints);
  parents_ = torch::zeros({0}, ints);
  scores_ = torch::zeros({0}, ints.dtype(torch::kFloat64));
  slot_ = torch::zeros({0}, ints);
  expansions_ = slots_fed_ = 0;
  // Every expansion feeds at most top_k nodes (the root's children are at most top_k too).
  max_slots_ = std::max<int64_t>(1, options_.depth) * options_.top_k;
  const int64_t k = Record(log_probs.unsqueeze(0), torch::full({1}, -1, ints),
                           torch::zeros({1}, ints.dtype(torch::kFloat64)));
  frontier_ = Arange(k, tokens_);
  frontier_size_ = k;
  frontier_ancestors_ = torch::zeros({k, max_slots_}, ints.dtype(torch::kBool));
}

DeviceDynamicTree::Feed DeviceDynamicTree::NextFeed() const {
  torch::NoGradGuard no_grad;
  Feed feed;
  feed.tokens = tokens_.index_select(0, frontier_);
  const torch::Tensor parent = parents_.index_select(0, frontier_);
  feed.parent_slot = torch::where(parent < 0, torch::full_like(parent, -1),
                                  slot_.index_select(0, parent.clamp_min(0)));
  feed.attends = frontier_ancestors_.narrow(1, 0, slots_fed_);
  return feed;
}

void DeviceDynamicTree::Expand(const torch::Tensor& log_probs) {
  torch::NoGradGuard no_grad;
  // The frontier was fed: its nodes hold the next slots, and their children attend them.
  const torch::Tensor slots = slots_fed_ + Arange(frontier_size_, frontier_);
  slot_.index_put_({frontier_}, slots);
  const torch::Tensor with_own =
      frontier_ancestors_.clone().scatter_(1, slots.unsqueeze(1), true);
  slots_fed_ += frontier_size_;
  const int64_t first = tokens_.size(0);
  const int64_t k = Record(log_probs, frontier_, scores_.index_select(0, frontier_));
  const int64_t candidates = frontier_size_ * k;
  // The global top_k of the candidates by cumulative score, in creation order.
  const int64_t keep = std::min<int64_t>(options_.top_k, candidates);
  const torch::Tensor chosen = BestInIndexOrder(scores_.narrow(0, first, candidates), keep);
  frontier_ = first + chosen;
  frontier_ancestors_ = with_own.index_select(0, chosen.div(k, "floor"));
  frontier_size_ = keep;
  ++expansions_;
}

StatusOr<torch::Tensor> DeviceDynamicTree::ChosenOnDevice() const {
  return GuardTorch("DeviceDynamicTree::ChosenOnDevice", [&]() -> StatusOr<torch::Tensor> {
    torch::NoGradGuard no_grad;
    const int64_t recorded = tokens_.size(0);
    const int64_t total = std::min<int64_t>(options_.total_tokens, recorded);
    const torch::Tensor chosen = BestInIndexOrder(scores_, total);
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

StatusOr<DeviceDynamicTree::ChosenTree> DeviceDynamicTree::ChosenTreeOnDevice() const {
  MULO_ASSIGN_OR_RETURN(torch::Tensor chosen, ChosenOnDevice());
  return GuardTorch("DeviceDynamicTree::ChosenTreeOnDevice", [&]() -> StatusOr<ChosenTree> {
    torch::NoGradGuard no_grad;
    const int64_t total = chosen.size(0) / 3;
    ChosenTree tree;
    tree.tokens = chosen.narrow(0, total, total);
    tree.parents = chosen.narrow(0, 2 * total, total);
    tree.max_depth = expansions_ + 1;
    // Ancestors level by level: a node's are its parent's and itself (parents come first, and
    // max_depth - 1 rounds reach every root's child).
    const torch::Tensor own = torch::eye(total, tree.parents.options().dtype(torch::kBool));
    const torch::Tensor has_parent = tree.parents.ge(0).unsqueeze(1);
    const torch::Tensor parent = tree.parents.clamp_min(0);
    tree.ancestors = own;
    for (int64_t level = 1; level < tree.max_depth; ++level) {
      tree.ancestors =
          own.logical_or(tree.ancestors.index_select(0, parent).logical_and(has_parent));
    }
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
