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

}  // namespace mulo::engine
