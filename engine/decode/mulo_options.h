// MuLo-SD's options, their two presets and their validation. The struct's defaults are the
// paper's literal settings (Algorithm 1 and Section 5: tau 1e-4, additive pooling k 1000 /
// delta 0.1, radius 3, one drafter row per step, D_r prefix, the drafter sampled as the target);
// a family may calibrate its own defaults in family.json, which the server serves unless a
// request asks for the PAPER preset (README "MuLo-SD on the bundled family").
#ifndef MULO_ENGINE_DECODE_MULO_OPTIONS_H_
#define MULO_ENGINE_DECODE_MULO_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "engine/core/status.h"
#include "engine/decode/local_expansion.h"
#include "engine/model/model_set.h"
#include "engine/sampling/pooling.h"

namespace mulo::engine {

// Where the drafter's prefix for the next rows comes from (paper step 7).
enum class DraftPrefix {
  // y = D_r(x) of every committed row, as the paper's Algorithm 1.
  kDownsampled,
  // Low-resolution rows whose r target rows were committed exactly as U_r drafted them keep the
  // drafter's own tokens; D_r(x) from the first row that changed on.
  kKeepDrafted,
  // Token by token: the drafter keeps its own token where its whole r x r target block was
  // committed exactly as drafted, D_r(x) elsewhere.
  kPatch,
  // Never D_r: the drafter continues from its own tokens, whatever the target changed.
  kOwn,
};
// "downsampled", "keep_drafted", "patch", "own" (for messages).
const char* DraftPrefixName(DraftPrefix prefix);

// How the positions R_X of a step are re-sampled (paper step 6).
enum class ResampleOrder {
  // The paper's Algorithm 1: in raster order, each position conditioned on every position
  // re-sampled before it; one target forward per position after the first.
  kSequential,
  // In raster order, but a position with no earlier re-sampled position of the step within
  // `parallel_radius` (2D, as the expansion's neighbourhood) is drawn from the verify
  // forward's distribution, whose context differs from the sequential one only outside that
  // neighbourhood; the others are drawn sequentially. Not in the paper: it leans on the
  // locality the paper's local expansion rests on to save the re-sampling forwards, which
  // dominate where a forward's cost grows with its tokens (a CPU). When every position is
  // re-sampled (tau > 1) each has its left neighbour re-sampled before it, so with
  // parallel_radius >= 1 this is exactly sequential, i.e. ar.
  kParallel,
  // MuLo-SD x ZipAR (not in the paper): in waves, one target forward each. Position (r, c) is
  // drawn once every re-sampled position before it in row r and every one in the rows above
  // at columns < c + resample_window is drawn, i.e. the rows of R_X advance as ZipAR's
  // wavefront; the positions of a wave are drawn from the same forward, each conditioned on
  // the sequence as it stands (re-samples not yet drawn still hold their drafts). A window of
  // the grid width or more is kSequential, draw for draw.
  kWavefront,
};

struct MuloOptions {
  double tau = 1e-4;     // acceptance threshold on the pooled target probability
  PoolingRule pooling;   // additive, k 1000 neighbours, delta 0.1
  int64_t radius = 3;    // local expansion radius l (0 = re-sample only the rejections)
  int64_t draft_rows = 1;
  Rejection rejection = Rejection::kLocal;
  DraftPrefix prefix = DraftPrefix::kDownsampled;
  ResampleOrder resample = ResampleOrder::kSequential;
  int64_t parallel_radius = 1;  // with kParallel
  // The drafter's own guidance and temperature; unset = the request's (the paper samples the
  // drafter exactly as the target).
  std::optional<double> draft_cfg_scale;
  std::optional<double> draft_temperature;
  // MuLo-SD x ZipAR (not in the paper, which names it future work): 0 drafts the
  // low-resolution rows one token per drafter forward; w in [1, drafter grid] lets the
  // drafter's rows advance as ZipAR's wavefront (zipar_drafter.h), row r + 1 starting once
  // row r has w tokens, so the rows after the ones a step needs are partly drafted already.
  // The drafter's grid width is its sequential drafting, token for token.
  int64_t zipar_window = 0;
  // kWavefront's window (ZipAR's paper default 8).
  int64_t resample_window = 8;
};

// The paper's settings (the struct's defaults), reachable by name from every request.
MuloOptions PaperMuloOptions();

// INVALID_ARGUMENT naming the field ("mulo.tau: ...") when out of range.
Status ValidateMuloOptions(const MuloOptions& options);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_MULO_OPTIONS_H_
