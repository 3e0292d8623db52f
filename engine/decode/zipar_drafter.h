// MuLo-SD x ZipAR (what the MuLo-SD paper leaves as future work, its Section 6): the
// low-resolution drafter's rows advance as ZipAR's wavefront (ZipArRows) instead of one token
// per forward. A MuLo-SD step needs the drafter's next `draft_rows` rows complete; with window
// w < drafter grid width the forwards that finish them also draft the rows below, so the next
// step starts with part of its rows drafted. The drafter continues from its own tokens while
// the step's prefix for the rows it drew agrees with them (always with draft_prefix OWN);
// otherwise it starts over from the prefix (one forward over it). With w = grid width every
// drafter token is drawn from the same distribution, in the same order of the drafter's
// random stream, as MuloProposer's sequential rows (tests/engine/decode/mulo_test.cc). Each
// wavefront forward replays the drafter pool's ZipAR graphs where the request has them
// (zipar_graphs.h: one replay and one read per forward, the eager forward's tokens;
// mulo_graphs_test), the restart's prefix feed and first draw excepted.
#ifndef MULO_ENGINE_DECODE_ZIPAR_DRAFTER_H_
#define MULO_ENGINE_DECODE_ZIPAR_DRAFTER_H_

#include <memory>
#include <vector>

#include "engine/decode/session.h"
#include "engine/decode/zipar_rows.h"

namespace mulo::engine {

class ZipArDrafter {
 public:
  // `drafter`: the drafter's stream (freshly prefilled); `sampling`: how its tokens are drawn.
  ZipArDrafter(ModelStream* drafter, int64_t grid, int64_t window, SamplingParams sampling)
      : drafter_(drafter), grid_(grid), window_(window), sampling_(sampling) {}

  // The drafter's tokens of low-resolution rows [0, rows_end): `prefix` (whole rows) followed
  // by its own draws, every row before rows_end complete.
  StatusOr<std::vector<int64_t>> DraftThrough(DecodeSession& session,
                                              const std::vector<int64_t>& prefix,
                                              int64_t rows_end);

 private:
  // Whether the rows drawn so far start with `prefix`.
  bool Agrees(const std::vector<int64_t>& prefix) const;
  // Rebuilds the wavefront after `prefix`: the cache holds the prefix in raster order and
  // the first token of the row after it is drawn.
  Status Restart(DecodeSession& session, const std::vector<int64_t>& prefix);

  ModelStream* drafter_;
  int64_t grid_, window_;
  SamplingParams sampling_;
  std::unique_ptr<ZipArRows> rows_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_ZIPAR_DRAFTER_H_
