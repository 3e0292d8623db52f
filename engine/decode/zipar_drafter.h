// MuLo-SD x ZipAR (what the MuLo-SD paper leaves as future work, its Section 6): the
// low-resolution drafter's rows advance as ZipAR's wavefront (ZipArRows) instead of one token
// per forward. A MuLo-SD step needs the drafter's next `draft_rows` rows complete; with window
// w < drafter grid width the forwards that finish them also draft the rows below, so the next
// step starts with part of its rows drafted. The drafter continues from its own tokens while
// the step's prefix for the rows it drew agrees with them (always with draft_prefix OWN);
// otherwise it starts over from the prefix (one forward over it). With w = grid width every
// drafter token is drawn from the same distribution, in the same order of the drafter's
// random stream, as MuloProposer's sequential rows (tests/engine/decode/mulo_test.cc). Each
// step's wavefront forwards replay the drafter pool's ZipAR graphs where the request has them
// (zipar_graphs.h: the forwards a step needs planned ahead and run as one chain, one replay,
// the eager forwards' tokens; mulo_graphs_test), and the drawn tokens stay on the device until
// the step's one read: each forward takes those before it drew from the graphs' tokens.
#ifndef MULO_ENGINE_DECODE_ZIPAR_DRAFTER_H_
#define MULO_ENGINE_DECODE_ZIPAR_DRAFTER_H_

#include <memory>
#include <vector>

#include "engine/decode/session.h"
#include "engine/decode/zipar_graphs.h"
#include "engine/decode/zipar_rows.h"

namespace mulo::engine {

class ZipArDrafter {
 public:
  // `drafter`: the drafter's stream (freshly prefilled); `sampling`: how its tokens are drawn.
  ZipArDrafter(ModelStream* drafter, int64_t grid, int64_t window, SamplingParams sampling)
      : drafter_(drafter), grid_(grid), window_(window), sampling_(sampling) {}

  // The drafter's own draws after `prefix` (whole rows) through low-resolution row rows_end
  // (exclusive), every row before it complete: int64 on the device, read with the step's
  // verdict and handed back to Resolve.
  StatusOr<torch::Tensor> DraftThrough(DecodeSession& session, const std::vector<int64_t>& prefix,
                                       int64_t rows_end);
  // The host values of the last DraftThrough's ids, which start at raster `from`.
  void Resolve(int64_t from, const std::vector<int64_t>& ids);

 private:
  // Whether the rows drawn so far start with `prefix`.
  bool Agrees(const std::vector<int64_t>& prefix) const;
  // Rebuilds the wavefront after `prefix`: the cache holds the prefix in raster order and
  // the first token of the row after it is drawn (left on the device in `graphs`' tokens when
  // the request has them).
  Status Restart(DecodeSession& session, const std::vector<int64_t>& prefix,
                 const ZipArGraphs* graphs);
  // The wavefront's next forwards through row rows_end - 1 (at most graphs.chain_forwards()),
  // planned and run as one chain of `graphs`, their draws left on the device; false, with
  // nothing run, where the chain does not fit (the forward then runs alone).
  StatusOr<bool> RunChain(DecodeSession& session, const ZipArGraphs& graphs, int64_t rows_end);

  ModelStream* drafter_;
  int64_t grid_, window_;
  SamplingParams sampling_;
  std::unique_ptr<ZipArRows> rows_;
  // Whether every token drawn since the last restart is in the graphs' tokens (each was drawn
  // by the graphs or put there).
  bool in_graph_tokens_ = false;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_ZIPAR_DRAFTER_H_
