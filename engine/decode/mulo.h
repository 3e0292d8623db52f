// MuLo-SD: multi-scale drafting with local verification (docs/methods.md; paper Algorithm 1).
// Each step: D_r turns the committed target rows into the drafter's prefix (its KV cache is
// kept up to the first drafter token that changed); the low-resolution drafter samples
// `draft_rows` full rows; U_r up-samples them to r x draft_rows target rows (L tokens); one
// target forward scores all L; position i is accepted when the target probability pooled over
// its latent neighbourhood A_{k,delta}(x_i) is >= tau; rejected positions grow into their 2D
// neighbourhoods N(t, radius) and every position there is re-sampled by the target in raster
// order, each conditioned on the sequence as it stands, refreshing the KV cache for the chunk
// since the previous re-sampled position. Relaxed (not lossless) unless tau > 1.
#ifndef MULO_ENGINE_DECODE_MULO_H_
#define MULO_ENGINE_DECODE_MULO_H_

#include "engine/decode/local_expansion.h"
#include "engine/decode/session.h"

namespace mulo::engine {

// Where the drafter's next prefix comes from (paper step 7).
enum class DraftPrefix {
  kDownsampled,  // y = D_r(x) for every committed row, as the paper's Algorithm 1
  // Low-resolution rows whose r target rows were accepted exactly as U_r drafted them keep
  // the drafter's own tokens (U_r of them is what was committed); D_r(x) from the first row
  // that changed on. Not in the paper: D_r(U_r(y)) agrees with y on few tokens for a weak
  // D_r, and every disagreement moves the drafter's context off what it drew.
  kKeepDrafted,
};

struct MuloOptions {
  double tau = 1e-4;        // acceptance threshold on the pooled probability
  int64_t k = 1000;         // |B_k| including the token itself; capped at the codebook size
  double delta = 0.1;       // pooled-mass bound of A_{k,delta}
  int64_t radius = 3;       // local expansion radius l (0 = no expansion)
  int64_t draft_rows = 1;   // drafter rows per step
  Rejection rejection = Rejection::kLocal;
  DraftPrefix prefix = DraftPrefix::kDownsampled;
};

// INVALID_ARGUMENT naming the field ("mulo.tau: ...") when out of range.
Status ValidateMuloOptions(const MuloOptions& options);

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
