// Exact speculative sampling over a chain of drafts (Leviathan et al. 2023, Chen et al. 2023):
// draft i is kept with probability min(1, p_i(x_i) / q_i(x_i)) while every earlier one was;
// the first rejected draft is replaced by a draw from norm(max(p_i - q_i, 0)); when the whole
// chain is kept and p has a row after it, the bonus token is drawn from that row. The output
// is distributed exactly as the target's p whatever q is (tests/engine/sampling/
// exact_verifier_test.cc, and the methods' distribution tests).
//
// Subclasses change only what one draft is judged on (Judge): GSD's GroupVerifier compares the
// masses of a group of tokens around x instead of x alone.
#ifndef MULO_ENGINE_SAMPLING_EXACT_VERIFIER_H_
#define MULO_ENGINE_SAMPLING_EXACT_VERIFIER_H_

#include <optional>
#include <utility>

#include "engine/sampling/chain_rejection.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

// The numbers a chain of `length` drafts is judged with on the device: the acceptance
// stream's next `length` and the draw stream's next one (from their UniformCaches when the
// rngs have them), without moving either stream.
struct ChainNumbers {
  torch::Tensor accept;  // float64 [length]
  torch::Tensor draw;    // float64 [1]
};
ChainNumbers PeekChainNumbers(const VerifierRngs& rngs, int64_t length,
                              const torch::Device& device);
// Moves the streams past the numbers the host loop would have drawn for a chain of `length`
// that kept `kept`: one acceptance number per judged draft (the kept ones and the first
// rejected), and one draw for a residual or, when `bonus_drawn` (a bonus row, sampling), for
// the bonus.
void SkipChainNumbers(const VerifierRngs& rngs, int64_t length, int64_t kept, bool bonus_drawn);

class ExactVerifier : public Verifier {
 public:
  // `rule` empty = AcceptDraft (min(1, p/q)); `residual` empty = ResidualDistribution.
  explicit ExactVerifier(AcceptRule rule = AcceptRule(), ResidualRule residual = ResidualRule())
      : rule_(std::move(rule)), residual_(std::move(residual)) {}
  // With the default rules, the chain is judged on the device (JudgeChains: by rngs.judge,
  // batched with other requests' chains, when there is one) and one small read brings back the
  // kept length and the next token; otherwise VerifyOnHost.
  StatusOr<Verdict> Verify(const VerifyInput& input, const VerifierRngs& rngs) const override;
  // The same verdict from a loop on the host over p and q copied there: the rules' reference
  // (the oracle of the device path's test) and the path of custom rules and subclasses.
  StatusOr<Verdict> VerifyOnHost(const VerifyInput& input, const VerifierRngs& rngs) const;

 protected:
  // Whether Verify may judge on the device: only the default judgement and residual are
  // written as tensor ops (chain_rejection.h); a subclass that judges otherwise says false.
  virtual bool JudgesOnDevice() const { return !rule_ && !residual_; }
  // For a relaxed rule that judges each draft by pooled masses (GroupVerifier), those masses
  // as tensor ops on p [L, V] and q [L, V] for tokens int64 [L], all on p's device; none for
  // the exact rule, which judges x_i's own.
  virtual std::optional<PooledMasses> PooledMassesOnDevice(const torch::Tensor& /*p*/,
                                                           const torch::Tensor& /*q*/,
                                                           const torch::Tensor& /*tokens*/) const {
    return std::nullopt;
  }

  struct Judgement {
    bool keep = false;
    bool relaxed = false;   // kept, though judging x alone with the same u would not have
    int64_t pooled = -1;    // tokens judged with x (the group's size - 1); -1 = x alone
  };
  // Keeps or rejects draft x from its rows p and q ([V] float32 on the host), drawing from
  // `accept` exactly as AcceptDraft does (one uniform per judged draft).
  virtual Judgement Judge(const torch::Tensor& p, const torch::Tensor& q, int64_t x,
                          Rng& accept) const;
  // The exact decision for masses p_x, q_x with the uniform u: u q < p, always when p >= q.
  static bool Keeps(double p_x, double q_x, double u) { return p_x >= q_x || u * q_x < p_x; }

 private:
  AcceptRule rule_;
  ResidualRule residual_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_EXACT_VERIFIER_H_
