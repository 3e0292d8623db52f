// ZipAR's next-set schedule (He et al. 2024, "ZipAR: Accelerating Autoregressive Image
// Generation through Spatial Locality"), kept apart from the model so that it can be tested
// alone: which tokens each target forward feeds, which positions its outputs predict, and what
// every fed token attends to.
//
//   - Row 0 is decoded as plain AR (it has no row above to lend a placeholder; this is the
//     schedule behind the paper's 2N + (N - 2)s forwards for an N x N grid).
//   - Row r + 1 (r >= 1) opens once row r has `window` tokens: its first token is predicted
//     from a placeholder fed at row r's last position, carrying the newest token of row r - 1
//     (the nearest decoded token to that position); the placeholder only lends its output and
//     is dropped from the cache right after the forward, so no real token ever attends to it.
//     With window = grid width the real last token of row r predicts it instead, as in AR.
//   - Each forward feeds every open row's newest token at its raster position; its output
//     predicts the next token of its row (a row's last token predicts nothing once the next
//     row is open, but is fed for the rows below).
//   - A fed token attends to the condition, itself, and every real token decoded before it
//     with a smaller raster index: its own row's earlier tokens and the rows above as far as
//     they exist (the tokens fed beside it in the same forward included). Token (r, c) thus
//     sees all of row 0 and min(W, k s + c + 1) tokens of row r - k >= 1.
#ifndef MULO_ENGINE_DECODE_ZIPAR_ROWS_H_
#define MULO_ENGINE_DECODE_ZIPAR_ROWS_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace mulo::engine {

class ZipArRows {
 public:
  struct Input {
    int64_t raster = 0;     // position fed at
    int64_t token = 0;      // id fed (-1: drawn on the device, not known here)
    int64_t source = 0;     // the raster whose token is fed (a placeholder's: its stand-in's)
    bool placeholder = false;
    int64_t predicts = -1;  // raster index its output's distribution is for; -1 = none
  };
  struct Forward {
    std::vector<Input> inputs;  // real tokens in row order, then the placeholders
    // [n, condition_rows + cached + n] bool: what input i attends to.
    torch::Tensor mask;
    int64_t placeholders = 0;
  };

  // Tests: whether the token at raster `own` may attend the earlier real token at raster
  // `seen` that the schedule lets it see; empty = always (ZipAR's wavefront). Distribution
  // tests narrow it to show that a wrong wavefront is caught.
  using Visibility = std::function<bool(int64_t own, int64_t seen)>;

  // window in [1, grid]; window = grid is plain AR. `complete` holds whole rows already
  // decoded and cached in raster order (after a restart from a prefix); the row after them
  // is open.
  ZipArRows(int64_t grid, int64_t window, const std::vector<int64_t>& complete = {},
            Visibility visible = Visibility());

  // Records the token drawn for raster position `raster` (the next of its row); -1 when it was
  // drawn on the device and is not known here yet.
  void Set(int64_t raster, int64_t token);
  // The id of a token recorded as -1 (raster already drawn), once it is known.
  void Resolve(int64_t raster, int64_t token) { tokens_[raster] = token; }
  // The drawn rasters whose ids are not known here, in raster order.
  std::vector<int64_t> Unknown() const;
  // Plans the next forward over a cache of `condition_rows` rows plus every token fed so far;
  // `with_mask` false leaves its mask undefined (ZipArGraphs builds it on the device).
  Forward Next(int64_t condition_rows, bool with_mask = true);
  // The mask of `forward` (planned by Next, not yet Fed).
  torch::Tensor Mask(const Forward& forward, int64_t condition_rows) const;
  // Records that `forward` ran: its real inputs stay in the cache, its placeholders do not.
  void Fed(const Forward& forward);

  // The grid as decoded so far (-1 = not yet), and which rows are complete.
  const std::vector<int64_t>& tokens() const { return tokens_; }
  std::vector<bool> RowsDone() const;
  // Raster index of every cached token, in cache order (after the condition rows).
  const std::vector<int64_t>& cached() const { return cached_; }
  // Whether a test narrowed the wavefront (Visibility): only Mask knows it then.
  bool narrowed() const { return static_cast<bool>(visible_); }

 private:
  // Tokens row r needs before row r + 1 opens.
  int64_t OpensNextRowAt(int64_t r) const { return r == 0 ? grid_ : window_; }

  int64_t grid_, window_;
  Visibility visible_;
  std::vector<int64_t> tokens_;
  std::vector<int64_t> decoded_;  // per row: tokens drawn
  std::vector<int64_t> fed_;      // per row: tokens in the cache
  std::vector<bool> open_;        // per row: its first token has been predicted
  std::vector<int64_t> cached_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_ZIPAR_ROWS_H_
