// Classic speculative decoding (Leviathan et al. 2023) with the family's small chain draft
// model: the drafter proposes `gamma` tokens, one target forward scores them all, each is kept
// with probability min(1, p/q) and the first rejected one is replaced by a draw from
// norm(max(p - q, 0)); when all are kept the target's next distribution gives a bonus token.
// Lossless: the tokens are distributed exactly as AR's (greedy: identical to AR greedy).
#ifndef MULO_ENGINE_DECODE_SPECULATIVE_H_
#define MULO_ENGINE_DECODE_SPECULATIVE_H_

#include <functional>

#include "engine/decode/decoding_method.h"
#include "engine/sampling/rng.h"

namespace mulo::engine {

// Keeps draft x given p(x), q(x) and the acceptance stream. The exact rule is AcceptDraft;
// tests swap in broken rules to show the statistical test catches them.
using AcceptRule = std::function<bool(double p_x, double q_x, Rng& rng)>;

struct SpeculativeOptions {
  int64_t gamma = 4;  // draft tokens per verification step
  AcceptRule accept;  // empty = AcceptDraft (min(1, p/q))
};

// INVALID_ARGUMENT naming "speculative.gamma" when out of range.
Status ValidateSpeculativeOptions(const SpeculativeOptions& options);

class SpeculativeDecoder : public DecodingMethod {
 public:
  explicit SpeculativeDecoder(SpeculativeOptions options = SpeculativeOptions())
      : options_(options) {}
  std::string name() const override { return "speculative"; }
  StatusOr<DecodeResult> Decode(const DecodeRequest& request, const ModelSet& models,
                                ProgressSink& progress, const CancelToken& cancel) const override;

 private:
  SpeculativeOptions options_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_SPECULATIVE_H_
