// Verification of a draft tree against the target's distributions from one tree-masked
// forward (EAGLE-1 / EAGLE-2 and, through the accept rule, the relaxed tree methods).
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
#ifndef MULO_ENGINE_SAMPLING_TREE_VERIFIER_H_
#define MULO_ENGINE_SAMPLING_TREE_VERIFIER_H_

#include <utility>

#include "engine/sampling/verifier.h"

namespace mulo::engine {

class TreeVerifier : public Verifier {
 public:
  // `rule` empty = AcceptDraft (min(1, p/q)).
  explicit TreeVerifier(AcceptRule rule = AcceptRule()) : rule_(std::move(rule)) {}

  // input.p: [L + 1, V], row j < L the target's distribution after draft j (its children's
  // position), row L after the committed prefix (the root's children). drafts.q: [L, V] the
  // distribution each draft was drawn from, or undefined for a deterministic tree.
  StatusOr<Verdict> Verify(const VerifyInput& input, const VerifierRngs& rngs) const override;

 private:
  AcceptRule rule_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_TREE_VERIFIER_H_
