// Verification of a draft tree against the target's distributions from one tree-masked
// forward: EAGLE-1 / EAGLE-2 and, with a latent relaxation, LANTERN and LANTERN++.
//
// Walking from the root: the children of the current node are tried in draft order against
// the target's distribution p after that node. Child x is kept with rule(p'(x), q_x(x)), where
// p' is p with every earlier rejected sibling's mass taken out (p' <- norm(max(p' - q_s, 0))
// after sibling s), and q_x is the distribution x was drawn from: for a static tree drawn
// without replacement, the drafter's distribution with the earlier siblings removed; for a
// deterministic (top-k) tree, q_x is one-hot on x, so x is kept with probability p'(x) and a
// rejection zeroes p'(x). A kept child becomes the current node; when every child is rejected
// (or the current node is a leaf) the next token is drawn from p'. With the exact rule
// min(1, p'/q) the committed tokens are distributed exactly as the target's p (recursive
// rejection sampling; tests/engine/sampling/tree_verifier_test.cc). Greedy: the child equal to
// argmax p is kept, else argmax p is the next token.
//
// The latent relaxation (LANTERN, LANTERN++; ../shared/reference/methods.md) replaces p'(x) in
// the test by the pooled p~(x) = p'(x) + c_m (pooling.h: the largest prefix of x's latent
// neighbours whose mass c_m stays within delta, or within (lambda - 1) p'(x)), so x is kept
// with min(1, p~/q). It is applied as the exact test followed, when that rejects and pooling
// borrowed mass, by the relaxation's extra chance (min(1, p~/q) - min(1, p'/q)) / (1 -
// min(1, p'/q)): the same overall probability, the exact rule's draw unchanged (delta 0 or
// lambda 1 give the lossless method's tokens for the same seed) and every relaxed acceptance
// counted. A rejection after pooling also takes the neighbourhood out, as the reference does:
// a deterministic tree zeroes p'(x) and p' on x's first k + 1 neighbours; a static tree
// subtracts q_x with q_x zeroed on those neighbours (they keep their target mass). Greedy
// relaxed: x is kept when it is the argmax of p with p(x) raised to p~(x); among kept siblings
// the one with the longest kept path wins (the reference picks its longest accepted candidate).
#ifndef MULO_ENGINE_SAMPLING_TREE_VERIFIER_H_
#define MULO_ENGINE_SAMPLING_TREE_VERIFIER_H_

#include <memory>
#include <utility>
#include <vector>

#include "engine/sampling/latent_neighbors.h"
#include "engine/sampling/pooling.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

// LANTERN's relaxed acceptance over the latent neighbour table; kind kNone = lossless.
struct TreeRelaxation {
  PoolingRule rule{Pooling::kNone};
  std::shared_ptr<const LatentNeighbors> neighbors;  // required unless rule.kind is kNone

  bool active() const { return rule.kind != Pooling::kNone; }
};

// Broken rules the distribution tests swap in to show that they catch them
// (tests/engine/decode/exact_joint_test.cc); the defaults are the exact rules.
struct TreeRuleHooks {
  // p' after a rejected child x drawn from q_x ([V] each; a deterministic tree's q_x is
  // one-hot on x); empty = norm(max(p' - q_x, 0)).
  ResidualRule residual;
  // Judge every child of the current node and keep, among the kept ones, the one whose kept
  // path below is longest (the first on ties): the SJD-PAC authors' "longest accepted row".
  // false = keep the first kept child, the rule that is lossless.
  bool keep_longest_path = false;
};

class TreeVerifier : public Verifier {
 public:
  // `rule` empty = AcceptDraft (min(1, p/q)).
  explicit TreeVerifier(AcceptRule rule = AcceptRule(), TreeRelaxation relaxation = {},
                        TreeRuleHooks hooks = {})
      : rule_(std::move(rule)), relaxation_(std::move(relaxation)), hooks_(std::move(hooks)) {}

  // input.p: [L + 1, V], row j < L the target's distribution after draft j (its children's
  // position), row L after the committed prefix (the root's children). drafts.q: [L, V] the
  // distribution each draft was drawn from, or undefined for a deterministic tree. Greedy and
  // relaxed: p should be the untempered guided distribution (at temperature 0 the request's
  // own is one-hot, which leaves nothing to pool).
  StatusOr<Verdict> Verify(const VerifyInput& input, const VerifierRngs& rngs) const override;

 private:
  // c_m for draft token x under row `target` (0 without a relaxation), counted in `verdict`.
  double Borrowed(const torch::Tensor& target, int64_t x, Verdict* verdict) const;
  // x's first k + 1 latent neighbours: what a rejection after pooling takes out.
  torch::Tensor RejectedNeighbourhood(int64_t x) const;
  Verdict Greedy(const torch::Tensor& p, const DraftBatch& drafts,
                 const std::vector<std::vector<int64_t>>& children) const;
  Verdict Sampled(const torch::Tensor& p, const torch::Tensor& q, const DraftBatch& drafts,
                  const std::vector<std::vector<int64_t>>& children,
                  const VerifierRngs& rngs) const;
  // The walk below `row` (the root: L): the kept path into verdict->accepted and the token
  // drawn after it into verdict->next_token.
  void Walk(int64_t row, const torch::Tensor& p, const torch::Tensor& q, const DraftBatch& drafts,
            const std::vector<std::vector<int64_t>>& children, const VerifierRngs& rngs,
            Verdict* verdict) const;

  AcceptRule rule_;
  TreeRelaxation relaxation_;
  TreeRuleHooks hooks_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_TREE_VERIFIER_H_
