// What every set of step graphs captured over a KV-cache pool at load keeps beside its graphs
// (eagle_tree_graphs.h, tree_verify_graphs.h): one memory pool that its graphs allocate from
// (one worker replays them, one at a time), the capture of one graph per span of the pool's
// slots, timed and with the device memory it reserved, and the counts it has served.
#ifndef MULO_ENGINE_MODEL_GRAPH_SET_H_
#define MULO_ENGINE_MODEL_GRAPH_SET_H_

#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/cuda_graph_capture.h"
#include "engine/model/pool_graphs.h"

namespace mulo::engine {

class KvPool;

class GraphSet {
 public:
  // Calls `capture(span)` for every span of `pool`'s slots (whole ForwardGraphs::kSpanRows, up
  // to its slot rows) of at least `min_rows` rows; the first error stops it. Records the time
  // and the device memory the captures took.
  Status CaptureSpans(const KvPool& pool, int64_t min_rows, const torch::Device& device,
                      const std::function<Status(int64_t span)>& capture);
  // One graph of `body` from the set's memory pool (ReplayableGraph::Make), counted; null when
  // the capture failed (counted too: its steps run eagerly). `static_bytes`: the graph's static
  // inputs, added to the memory counted.
  std::unique_ptr<ReplayableGraph> Make(const torch::Device& device, std::function<void()> body,
                                        bool emulated, int64_t static_bytes);
  // One replay that served `calls` requests.
  void CountReplay(int64_t calls) const;
  PoolGraphs::Counts counts() const;

 private:
  GraphMemoryPool memory_;
  mutable std::mutex mu_;  // counts_ only
  mutable PoolGraphs::Counts counts_;  // replays are counted by const Runs
};

// A graph set's Run over the calls of a batch (tree_verify_graphs.h, eagle_tree_graphs.h): the
// calls of each kind (`kind_of(call)`: whether the request's distribution is filtered) apart,
// in batches of at most `most`, each one replay through `run_batch(batch, kind)`; every call's
// output in the calls' order.
template <typename Output, typename Call, typename KindOf, typename RunBatch>
StatusOr<std::vector<Output>> RunInBatches(const std::vector<Call>& calls, int64_t most,
                                           const KindOf& kind_of, const RunBatch& run_batch) {
  std::vector<Output> outputs(calls.size());
  for (const bool kind : {false, true}) {
    std::vector<size_t> group;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (kind_of(calls[i]) == kind) group.push_back(i);
    }
    for (size_t start = 0; start < group.size(); start += static_cast<size_t>(most)) {
      const size_t end = std::min(group.size(), start + static_cast<size_t>(most));
      std::vector<const Call*> batch;
      for (size_t i = start; i < end; ++i) batch.push_back(&calls[group[i]]);
      MULO_ASSIGN_OR_RETURN(std::vector<Output> out, run_batch(batch, kind));
      for (size_t i = start; i < end; ++i) outputs[group[i]] = std::move(out[i - start]);
    }
  }
  return outputs;
}

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_GRAPH_SET_H_
