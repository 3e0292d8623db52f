// MuLo-SD: multi-scale drafting with local verification (docs/methods.md; paper Algorithm 1).
// Each step: the low-resolution drafter samples `draft_rows` full rows after its prefix (the
// paper's D_r of the committed target rows, or its own tokens: MuloOptions::prefix); U_r
// up-samples them to r x draft_rows target rows (L tokens); one target forward scores all L;
// position i is accepted when the target probability pooled over its latent neighbourhood
// (MuloOptions::pooling) is >= tau; rejected positions grow into their 2D neighbourhoods
// N(t, radius) and every position there is re-sampled by the target in raster order, each
// conditioned on the sequence as it stands, refreshing the KV cache for the chunk since the
// previous re-sampled position. Relaxed (not lossless) unless tau > 1.
#ifndef MULO_ENGINE_DECODE_MULO_H_
#define MULO_ENGINE_DECODE_MULO_H_

#include "engine/decode/local_expansion.h"
#include "engine/decode/mulo_options.h"
#include "engine/decode/session.h"

namespace mulo::engine {

class MuloDecoder : public SteppedMethod {
 public:
  explicit MuloDecoder(MuloOptions options = MuloOptions()) : options_(options) {}
  std::string name() const override { return "mulo"; }
  Status Validate(const ModelSet& models) const override;

 protected:
  StatusOr<std::unique_ptr<State>> Begin(DecodeSession& session) const override;

 private:
  MuloOptions options_;
};

// S_T = T_p / ((1 - a) T_p + T_q) (paper Eq. 9): the speedup MuLo-SD would reach if a
// drafter token cost what a target token costs, T_p / T_q target / drafter tokens.
double TheoreticalSpeedup(double acceptance, int64_t target_tokens, int64_t drafter_tokens);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_MULO_H_
