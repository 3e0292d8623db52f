// ZipAR (He et al. 2024): next-set decoding with no draft model. Row r + 1 starts once row r
// has `window` tokens, and each target forward advances every open row by one token, so the
// rows of an image move down the grid like a wavefront: 2N + (N - 2) window forwards for an
// N x N grid instead of N^2. The schedule, the placeholder that opens a row and the attention
// mask are ZipArRows' (zipar_rows.h). Not lossless (a token sees the row above only as far as
// it exists); window = grid width is plain AR, token for token and draw for draw
// (tests/engine/decode/zipar_test.cc). The row emitter streams rows as they complete.
#ifndef MULO_ENGINE_DECODE_ZIPAR_H_
#define MULO_ENGINE_DECODE_ZIPAR_H_

#include <string>

#include "engine/decode/session.h"
#include "engine/decode/zipar_graphs.h"
#include "engine/decode/zipar_rows.h"

namespace mulo::engine {

struct ZipArOptions {
  int64_t window = 8;  // tokens of row r before row r + 1 starts (paper: 8 on LlamaGen)
  ZipArRows::Visibility visible;  // tests: a narrower wavefront (zipar_rows.h); empty = ZipAR's
};

// One forward of a ZipAR wavefront through `stream`, then every predicted token drawn, top row
// first (the order of k draws one by one; one draw per forward when one row is open: AR's
// order), with the session's `numbers` stream and `sampling`, and read once. From one replay of
// `graphs` (zipar_graphs.h: the forward, its mask and its draws inside) where they fit the
// forward, else eagerly (a host-built mask, the drawing rows gathered and drawn on the device);
// the placeholders' rows are dropped from the cache afterwards either way. Shared by ZipAR
// (the target's graphs) and the MuLo-SD drafter's wavefront (the drafter pool's). With `read`
// false a replay's tokens stay on the device (recorded as -1 in `rows`, in the graphs'
// Tokens): the drafter's wavefront, whose step reads them with its verdict; an eager forward
// after such replays first reads what it feeds.
Status StepRows(DecodeSession& session, ModelStream& stream, ZipArRows& rows,
                const ZipArGraphs* graphs, RngStream numbers, const SamplingParams& sampling,
                bool read = true);

// The graphs' call of `forward`, planned by `rows` and not yet fed: its inputs, its cached
// rows' rasters and its draws in the order they take numbers (none attached yet).
ZipArGraphs::Call PlannedCall(const ZipArRows& rows, const ZipArRows::Forward& forward, bool read);
// Records in `rows` that `forward` ran with its draws left on the device (-1 each).
void PlannedAsDrawnOnDevice(ZipArRows& rows, const ZipArRows::Forward& forward);

class ZipArDecoder : public SteppedMethod {
 public:
  explicit ZipArDecoder(ZipArOptions options = ZipArOptions()) : options_(options) {}
  std::string name() const override { return "zipar"; }
  // INVALID_ARGUMENT naming "zipar.window" when outside [1, grid width].
  Status Validate(const ModelSet& models) const override;

 protected:
  StatusOr<std::unique_ptr<State>> Begin(DecodeSession& session) const override;

 private:
  ZipArOptions options_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_ZIPAR_H_
