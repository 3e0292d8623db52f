#include "engine/decode/local_expansion.h"

#include <algorithm>

namespace mulo::engine {

std::vector<int64_t> ExpandRejections(const std::vector<int64_t>& rejected, int64_t begin,
                                      int64_t end, int64_t width, int64_t radius,
                                      Rejection mode) {
  std::vector<int64_t> out;
  if (rejected.empty()) return out;
  const int64_t t0 = rejected.front();
  if (mode == Rejection::kRaster) {
    for (int64_t u = t0; u < end; ++u) out.push_back(u);
    return out;
  }
  std::vector<bool> marked(end - begin, false);
  // The loops run over the grid only: a radius past its edge (a client may send 2^32 - 1)
  // costs what the whole grid costs, not (2 radius + 1)^2 empty iterations.
  const int64_t last_row = (end - 1) / width;
  for (int64_t t : rejected) {
    const int64_t row = t / width, col = t % width;
    for (int64_t r = std::max<int64_t>(0, row - radius); r <= std::min(last_row, row + radius);
         ++r) {
      for (int64_t c = std::max<int64_t>(0, col - radius);
           c <= std::min<int64_t>(width - 1, col + radius); ++c) {
        const int64_t u = r * width + c;
        if (u < t0 || u < begin || u >= end) continue;
        marked[u - begin] = true;
      }
    }
  }
  for (int64_t i = 0; i < end - begin; ++i) {
    if (marked[i]) out.push_back(begin + i);
  }
  return out;
}

torch::Tensor ExpandRejectionsOnDevice(const torch::Tensor& rejected, int64_t begin,
                                       int64_t width, int64_t radius, Rejection mode) {
  at::NoGradGuard no_grad;
  // Every position from the first rejection on (t0 <= u).
  const torch::Tensor from_first = rejected.to(torch::kInt64).cumsum(0) > 0;
  if (mode == Rejection::kRaster) return from_first;
  const int64_t length = rejected.size(0), lead = begin % width;
  const int64_t rows = (lead + length + width - 1) / width;
  // The positions' rows of the grid, the rejections marked; outside [begin, end) nothing is
  // marked and nothing is kept. A radius past the grid's extent covers what the extent does.
  const torch::Tensor grid =
      torch::constant_pad_nd(rejected.to(torch::kFloat32), {lead, rows * width - lead - length})
          .view({1, 1, rows, width});
  const int64_t r = std::min(radius, std::max(rows, width));
  const torch::Tensor near =
      torch::max_pool2d(grid, {2 * r + 1, 2 * r + 1}, /*stride=*/{1, 1}, /*padding=*/{r, r});
  return near.flatten().narrow(0, lead, length).gt(0).logical_and(from_first);
}

}  // namespace mulo::engine
