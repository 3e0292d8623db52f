// MuLo-SD's proposer (paper Algorithm 1, steps 7, 1 and 2): D_r turns the committed target rows
// into the low-resolution drafter's prefix (its cache kept up to the first token that changed),
// the drafter samples `draft_rows` whole rows, and U_r up-samples them to r x draft_rows target
// rows. The drafts are U_r's argmax tokens, not samples of a known q, so they carry no q and
// are independent positions (parents -1) for the verifier.
#ifndef MULO_ENGINE_DECODE_MULO_PROPOSER_H_
#define MULO_ENGINE_DECODE_MULO_PROPOSER_H_

#include <cstdint>
#include <vector>

#include "engine/decode/mulo.h"
#include "engine/decode/session.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

class MuloProposer {
 public:
  MuloProposer(ModelStream* drafter, const MuloOptions& options, const ModelSet& models);

  // The drafts for the target rows after the committed ones.
  StatusOr<DraftBatch> Propose(DecodeSession& session);

  // Tells the proposer what was committed for the rows it last drafted (`committed` holds the
  // whole prefix): with DraftPrefix::kKeepDrafted the drafter keeps its own tokens for the
  // low-resolution rows whose target rows came out exactly as drafted.
  void Committed(const std::vector<int64_t>& committed);

 private:
  ModelStream* drafter_;
  MuloOptions options_;
  const ModelSet& models_;
  int64_t grid_, small_, r_;
  // The last proposal: drafter tokens of every low-resolution row it covered, its first
  // drafted low-resolution row, and U_r's target tokens after the committed prefix.
  std::vector<int64_t> y_;
  int64_t first_row_ = 0, rows_ = 0;
  std::vector<int64_t> drafts_;
  // kKeepDrafted: the drafter's own tokens of the leading rows committed as drafted.
  std::vector<int64_t> kept_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_MULO_PROPOSER_H_
