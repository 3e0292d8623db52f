#include "engine/decode/dynamic_tree.h"

#include <algorithm>
#include <numeric>

namespace mulo::engine {
namespace {

// Indices of `ids` ordered by descending score, creation order among equals.
std::vector<int64_t> ByScore(std::vector<int64_t> ids, const std::vector<double>& scores) {
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  return ids;
}

}  // namespace

int64_t ChosenNodes(const DynamicTreeOptions& options, int64_t vocab) {
  const int64_t k = std::min(options.top_k, vocab);
  return std::min(options.total_tokens, k + options.depth * k * k);
}

void DynamicTreeBuilder::AddChildren(int64_t parent, double base, const torch::Tensor& log_probs,
                                     std::vector<int64_t>* added) {
  const int64_t k = std::min<int64_t>(options_.top_k, log_probs.size(0));
  const auto top = log_probs.to(torch::kCPU, torch::kFloat64).topk(k);
  const auto values = std::get<0>(top), indices = std::get<1>(top);
  for (int64_t j = 0; j < k; ++j) {
    added->push_back(static_cast<int64_t>(tokens_.size()));
    tokens_.push_back(indices[j].item<int64_t>());
    parents_.push_back(parent);
    scores_.push_back(base + values[j].item<double>());
  }
}

void DynamicTreeBuilder::Start(const torch::Tensor& log_probs) {
  tokens_.clear();
  parents_.clear();
  scores_.clear();
  expansions_ = 0;
  frontier_.clear();
  AddChildren(-1, 0.0, log_probs, &frontier_);
}

void DynamicTreeBuilder::Expand(const torch::Tensor& log_probs) {
  std::vector<int64_t> candidates;
  for (size_t i = 0; i < frontier_.size(); ++i) {
    AddChildren(frontier_[i], scores_[frontier_[i]], log_probs[i], &candidates);
  }
  candidates = ByScore(candidates, scores_);
  candidates.resize(std::min<size_t>(candidates.size(), options_.top_k));
  std::sort(candidates.begin(), candidates.end());  // creation order
  frontier_ = candidates;
  ++expansions_;
}

DynamicTreeBuilder::Chosen DynamicTreeBuilder::Finish() const {
  std::vector<int64_t> all(tokens_.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<int64_t> chosen = ByScore(all, scores_);
  chosen.resize(std::min<size_t>(chosen.size(), options_.total_tokens));
  // Creation order puts parents first; every chosen node's parent is chosen too, since a
  // parent scores at least as much as its child and was created earlier.
  std::sort(chosen.begin(), chosen.end());
  std::vector<int64_t> index_of(tokens_.size(), -1);
  for (size_t i = 0; i < chosen.size(); ++i) index_of[chosen[i]] = static_cast<int64_t>(i);
  Chosen out;
  out.nodes = chosen;
  std::vector<int64_t> parents;
  for (int64_t node : chosen) {
    out.tokens.push_back(tokens_[node]);
    parents.push_back(parents_[node] < 0 ? -1 : index_of[parents_[node]]);
  }
  out.shape = *TreeFromParents(parents);
  return out;
}

}  // namespace mulo::engine
