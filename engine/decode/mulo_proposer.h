// MuLo-SD's proposer (paper Algorithm 1, steps 7, 1 and 2): the low-resolution drafter continues
// from its prefix for the committed rows (its KV cache kept up to the first token that
// changed), samples `draft_rows` whole rows with its own guidance and temperature, and U_r
// up-samples them to r x draft_rows target rows. After verification the prefix for the new rows
// is derived from what the target committed, by MuloOptions::prefix: D_r of the committed
// tokens (the paper), the drafter's own tokens where their target rows or r x r blocks came out
// as drafted, or always its own. The drafts are U_r's argmax tokens, not samples of a known q,
// so they carry no q and are independent positions (parents -1) for the verifier.
#ifndef MULO_ENGINE_DECODE_MULO_PROPOSER_H_
#define MULO_ENGINE_DECODE_MULO_PROPOSER_H_

#include <cstdint>
#include <vector>

#include <memory>

#include "engine/decode/mulo_options.h"
#include "engine/decode/mulo_verify_graphs.h"
#include "engine/decode/session.h"
#include "engine/decode/zipar_drafter.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

class MuloProposer {
 public:
  // `draft_sampling`: how the drafter's tokens are drawn (the request's top-k / top-p with the
  // drafter's guidance and temperature).
  MuloProposer(ModelStream* drafter, const MuloOptions& options,
               const SamplingParams& draft_sampling, const ModelSet& models);

  // The drafts for the target rows after the committed ones, left on the device: the
  // drafter's new tokens and U_r's drafts (int64, possibly empty). The caller reads them with
  // whatever else it needs (one host read per step) and hands them back to Resolve.
  struct Proposal {
    torch::Tensor drafter_ids;  // the drafter's newly drawn tokens, in raster order
    torch::Tensor drafts;       // U_r's tokens after the committed prefix [length]
    int64_t length = 0;
  };
  StatusOr<Proposal> Propose(DecodeSession& session);
  // Propose's step (1) alone, for graphs that up-sample in the target's replay
  // (mulo_verify_graphs.h, Shape::upsample): the drafter's new tokens, left on the device
  // after drafter_prefix(). Resolve follows as after Propose.
  StatusOr<torch::Tensor> DraftNewRows(DecodeSession& session);
  // The drafter's tokens before the rows the last proposal drew (whole rows).
  const std::vector<int64_t>& drafter_prefix() const { return y_; }

  // The rows the step after `committed` tokens drafts (Propose plans them itself): the
  // drafter's tokens and U_r's drafts they make.
  void PlanRows(int64_t committed);
  int64_t row_tokens() const { return rows_ * small_; }
  int64_t draft_tokens() const { return rows_ * r_ * grid_; }
  // Instead of Propose, after PlanRows: whether the step graphs `graphs` (mulo_verify_graphs.h,
  // Shape::draft) may draw the drafter's rows and up-sample them inside the target's replay
  // (the drafter continues from exactly what it was fed: no prefix to re-feed, no ZipAR
  // wavefront), and the rows' call (the drafter stream's numbers and sampling; the target
  // fills in the rest). Resolve follows as after Propose.
  bool FitsStepGraphs(const MuloVerifyGraphs& graphs) const;
  MuloVerifyGraphs::DrafterRow DraftInGraphs(DecodeSession& session);
  // The drafter's stream (the step graphs draw its row inside the target's replay).
  ModelStream* drafter() const { return drafter_; }
  // The host values of the last Proposal's two tensors.
  void Resolve(const std::vector<int64_t>& drafter_ids, const std::vector<int64_t>& drafts);

  // Takes what was committed for the rows last drafted (`committed` holds the whole prefix) and
  // derives the drafter's prefix for them; counts its sources in the session's Stats.
  Status Committed(DecodeSession& session, const std::vector<int64_t>& committed);

 private:
  // Whether the target committed the r x r block (low-resolution token `col` of `row`), or the
  // whole r target rows of `row`, exactly as U_r drafted them.
  bool BlockAsDrafted(const std::vector<int64_t>& committed, int64_t row, int64_t col) const;
  bool RowAsDrafted(const std::vector<int64_t>& committed, int64_t row) const;

  // The drafter's rows one token per forward after the prefix `y` (zipar_window 0), drawn and
  // fed back on the device: int64 [new tokens] there, not read.
  StatusOr<torch::Tensor> DraftRows(DecodeSession& session, const std::vector<int64_t>& y);

  ModelStream* drafter_;
  std::unique_ptr<ZipArDrafter> zipar_;  // the wavefront, when options_.zipar_window > 0
  MuloOptions options_;
  SamplingParams draft_sampling_;
  const ModelSet& models_;
  int64_t grid_, small_, r_;
  // The drafter's prefix: one low-resolution token per committed low-resolution position.
  std::vector<int64_t> prefix_;
  // The last proposal: the drafter's tokens (prefix + drafted rows), its first drafted
  // low-resolution row and row count, and U_r's target tokens after the committed prefix.
  std::vector<int64_t> y_;
  int64_t drawn_from_ = 0;  // y_'s position of the first token DraftRows drew (until Resolve)
  int64_t first_row_ = 0, rows_ = 0;
  std::vector<int64_t> drafts_;
  bool diverged_ = false;  // kKeepDrafted: a row changed, so D_r from then on
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_MULO_PROPOSER_H_
