// Classic speculative decoding (Leviathan et al. 2023) with the family's small chain draft
// model: the drafter proposes `gamma` tokens, one target forward scores them all, and the exact
// verifier keeps each with probability min(1, p/q), replaces the first rejected one from
// norm(max(p - q, 0)) and draws a bonus token when all are kept. Lossless: the tokens are
// distributed exactly as AR's (greedy: identical to AR greedy). With CUDA graphs over the
// KV-cache pools, a step of the default gamma is two replays and one host read: the drafter's
// chain (row_graphs.h, Shape::drafts) and the target's verification (verify_graphs.h).
#ifndef MULO_ENGINE_DECODE_SPECULATIVE_H_
#define MULO_ENGINE_DECODE_SPECULATIVE_H_

#include "engine/decode/kv_pools.h"
#include "engine/decode/session.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

constexpr int64_t kMaxGamma = 64;  // draft tokens per step a request may ask for

struct SpeculativeOptions {
  // Draft tokens per verification step; the default is what the pools' graphs hold
  // (kv_pools.h: another gamma drafts and verifies without them).
  int64_t gamma = KvPools::kGraphedChain;
  AcceptRule accept;  // empty = AcceptDraft (min(1, p/q)); tests swap in broken rules
  ResidualRule residual;  // empty = norm(max(p - q, 0)); tests swap in broken rules
};

// INVALID_ARGUMENT naming "speculative.gamma" when out of range.
Status ValidateSpeculativeOptions(const SpeculativeOptions& options);

class SpeculativeDecoder : public SteppedMethod {
 public:
  explicit SpeculativeDecoder(SpeculativeOptions options = SpeculativeOptions())
      : options_(options) {}
  std::string name() const override { return "speculative"; }
  Status Validate(const ModelSet& models) const override;

 protected:
  StatusOr<std::unique_ptr<State>> Begin(DecodeSession& session) const override;

 private:
  SpeculativeOptions options_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_SPECULATIVE_H_
