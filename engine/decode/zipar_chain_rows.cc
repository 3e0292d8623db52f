#include "engine/decode/zipar_chain_rows.h"

#include <algorithm>

#include "engine/decode/zipar_graphs.h"
#include "engine/decode/zipar_rows.h"

namespace mulo::engine {
namespace {

// The chains of a drafter restarted after `start` whole rows with `window`, through the image.
void AddChains(int64_t grid, int64_t window, int64_t start, int64_t draft_rows,
               std::set<std::vector<int64_t>>& profiles) {
  const int64_t longest = grid * draft_rows;
  ZipArRows rows(grid, window, std::vector<int64_t>(start * grid, 0));
  rows.Set(start * grid, -1);  // the restart's first draw
  for (int64_t end = std::min(grid, start + draft_rows);; end = std::min(grid, end + draft_rows)) {
    std::vector<int64_t> chain;
    while (!rows.RowsDone()[end - 1]) {
      const ZipArRows::Forward forward = rows.Next(/*condition_rows=*/0, /*with_mask=*/false);
      chain.push_back(ZipArGraphs::RowsOf(static_cast<int64_t>(forward.inputs.size())));
      rows.Fed(forward);
      for (const ZipArRows::Input& in : forward.inputs) {
        if (in.predicts >= 0) rows.Set(in.predicts, -1);
      }
      if (static_cast<int64_t>(chain.size()) == longest) {
        profiles.insert(chain);
        chain.clear();
      }
    }
    if (!chain.empty()) profiles.insert(chain);
    if (end == grid) break;
  }
}

}  // namespace

std::set<std::vector<int64_t>> ZipArChainRows(int64_t grid, int64_t draft_rows) {
  std::set<std::vector<int64_t>> profiles;
  if (grid < 1 || draft_rows < 1) return profiles;
  for (int64_t window = 1; window <= grid; ++window) {
    for (int64_t start = 0; start < grid; ++start) {
      AddChains(grid, window, start, draft_rows, profiles);
    }
  }
  return profiles;
}

}  // namespace mulo::engine
