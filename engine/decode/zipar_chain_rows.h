// The row profiles of the chains a ZipAR drafter runs (MuLo-SD x ZipAR, zipar_drafter.h): for
// every window and every row a restart may start from, the forwards each step of `draft_rows`
// rows needs, cut into chains of at most grid x draft_rows forwards, each forward's inputs as
// ZipArGraphs::RowsOf buckets. ZipArRows' schedule depends on counts alone (which rows are
// open, which rasters a forward feeds and predicts), not on token values, so these are
// exactly the chains ZipArDrafter::RunChain plans; the drafter's pool captures a graph for
// each (synth's 8 x 8 drafter, one row per step: 38 profiles over 8 windows).
#ifndef MULO_ENGINE_DECODE_ZIPAR_CHAIN_ROWS_H_
#define MULO_ENGINE_DECODE_ZIPAR_CHAIN_ROWS_H_

#include <cstdint>
#include <set>
#include <vector>

namespace mulo::engine {

std::set<std::vector<int64_t>> ZipArChainRows(int64_t grid, int64_t draft_rows);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_ZIPAR_CHAIN_ROWS_H_
