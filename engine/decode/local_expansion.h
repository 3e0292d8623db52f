// MuLo-SD's local expansion (paper Eq. 6-7): each rejected position t grows into its 2D
// neighbourhood N(t, l) = {u : |row_u - row_t| <= l, |col_u - col_t| <= l, u >= t0}, t0 the
// first rejection, restricted to the positions being verified. Raster mode instead rejects
// everything from t0 on, as standard speculative decoding does.
#ifndef MULO_ENGINE_DECODE_LOCAL_EXPANSION_H_
#define MULO_ENGINE_DECODE_LOCAL_EXPANSION_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace mulo::engine {

enum class Rejection {
  kLocal,   // re-sample the union of N(t, radius) over rejected t
  kRaster,  // re-sample every position from the first rejection on
};

// `rejected`: global raster indices in [begin, end), ascending. Returns the positions to
// re-sample, ascending, all in [first rejection, end). Empty when nothing was rejected.
std::vector<int64_t> ExpandRejections(const std::vector<int64_t>& rejected, int64_t begin,
                                      int64_t end, int64_t width, int64_t radius,
                                      Rejection mode);

// The same on the device, for a step that decides without a host read: `rejected` (bool [L],
// position begin + i at index i) in, the positions to re-sample (bool [L]) out, equal to
// ExpandRejections' (the neighbourhood as a max-pool over the rows the positions span).
torch::Tensor ExpandRejectionsOnDevice(const torch::Tensor& rejected, int64_t begin,
                                       int64_t width, int64_t radius, Rejection mode);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_LOCAL_EXPANSION_H_
