// EAGLE-2's dynamic draft tree. The root's top_k children start the tree and form the first
// frontier; each of `depth` expansions lets every frontier node propose its top_k children,
// scored by cumulative log-probability (parent score + the child's log q), records all of
// them, and keeps the global top_k as the next frontier. The tree handed to verification is
// the `total_tokens` recorded nodes of highest score, parents before children (a child never
// outscores its parent, so the set is connected). Ties keep creation order.
//
// The caller computes the drafter's distributions: the root's for Start, then one row per
// frontier node for each Expand (EAGLE's head runs the frontier in one masked forward).
#ifndef MULO_ENGINE_DECODE_DYNAMIC_TREE_H_
#define MULO_ENGINE_DECODE_DYNAMIC_TREE_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "engine/decode/draft_tree.h"

namespace mulo::engine {

// Bounds of a draft tree a request may ask for (total_tokens, depth, top_k): the verify forward
// and the tree mask grow with them.
constexpr int64_t kMaxTreeTokens = 256;
constexpr int64_t kMaxTreeDepth = 32;
constexpr int64_t kMaxTreeTopK = 64;

struct DynamicTreeOptions {
  int64_t total_tokens = 60;  // nodes verified per step (EAGLE-2's defaults: 60 / 7 / 10)
  int64_t depth = 7;          // expansions after the root's children (tree depth <= depth + 1)
  int64_t top_k = 10;         // children per expanded node, and the frontier's width
};

// The nodes a tree of `options` hands to verification over `vocab` tokens: total_tokens, or
// every node it records when fewer (the root's k children and k^2 per expansion, k =
// min(top_k, vocab)). The tree verify graphs' node count (tree_verify_graphs.h).
int64_t ChosenNodes(const DynamicTreeOptions& options, int64_t vocab);

class DynamicTreeBuilder {
 public:
  explicit DynamicTreeBuilder(DynamicTreeOptions options) : options_(options) {}

  // log_probs: [V], the drafter's log-distribution after the committed prefix.
  void Start(const torch::Tensor& log_probs);
  // The recorded nodes whose children the next Expand takes, in order.
  const std::vector<int64_t>& frontier() const { return frontier_; }
  // log_probs: [frontier().size(), V], row i after frontier node i.
  void Expand(const torch::Tensor& log_probs);
  // Expansions left (depth minus those done).
  int64_t expansions_left() const { return options_.depth - expansions_; }

  // Every recorded node (creation order): token, parent (-1 = root), cumulative log-prob.
  const std::vector<int64_t>& tokens() const { return tokens_; }
  const std::vector<int64_t>& parents() const { return parents_; }
  const std::vector<double>& scores() const { return scores_; }

  // The chosen tree: recorded node ids (parents first), their tokens and shape (parents
  // re-indexed into the chosen list).
  struct Chosen {
    std::vector<int64_t> nodes;
    std::vector<int64_t> tokens;
    TreeShape shape;
  };
  Chosen Finish() const;

 private:
  // Records the top_k children of `parent` (score `base`) from `log_probs` [V].
  void AddChildren(int64_t parent, double base, const torch::Tensor& log_probs,
                   std::vector<int64_t>* added);

  DynamicTreeOptions options_;
  int64_t expansions_ = 0;
  std::vector<int64_t> tokens_, parents_;
  std::vector<double> scores_;
  std::vector<int64_t> frontier_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_DYNAMIC_TREE_H_
