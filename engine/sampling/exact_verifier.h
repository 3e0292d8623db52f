// Exact speculative sampling over a chain of drafts (Leviathan et al. 2023, Chen et al. 2023):
// draft i is kept with probability min(1, p_i(x_i) / q_i(x_i)) while every earlier one was;
// the first rejected draft is replaced by a draw from norm(max(p_i - q_i, 0)); when the whole
// chain is kept and p has a row after it, the bonus token is drawn from that row. The output
// is distributed exactly as the target's p whatever q is (tests/engine/sampling/
// exact_verifier_test.cc, and the methods' distribution tests).
#ifndef MULO_ENGINE_SAMPLING_EXACT_VERIFIER_H_
#define MULO_ENGINE_SAMPLING_EXACT_VERIFIER_H_

#include <utility>

#include "engine/sampling/verifier.h"

namespace mulo::engine {

class ExactVerifier : public Verifier {
 public:
  // `rule` empty = AcceptDraft (min(1, p/q)).
  explicit ExactVerifier(AcceptRule rule = AcceptRule()) : rule_(std::move(rule)) {}
  StatusOr<Verdict> Verify(const VerifyInput& input, const VerifierRngs& rngs) const override;

 private:
  AcceptRule rule_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_EXACT_VERIFIER_H_
