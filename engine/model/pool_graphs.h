// CUDA graphs of one model's batched forward over its KV-cache pool (kv_pool.h), captured once
// at load for every key and shared by every request (vLLM's and SGLang's graphs per batch
// size, over slots instead of pages).
//
// A batch is any set of calls whose caches are views of the pool's slots: a lone request's
// forward (one call) or the engine loop's batched forward of several requests (engine_loop.h).
// Each call has `batch` guidance streams and n new rows; the graph runs them as `streams`
// streams of `rows` new rows each:
//   - streams padded up to a power of two: a pad stream writes to the pool's scratch slot and
//     sees only its own rows;
//   - rows per stream padded up to a power of two: a pad row takes the stream's last position,
//     writes past its live length (stale rows, overwritten later) and sees the stream's cached
//     prefix and itself (as in forward_graphs.h);
//   - every stream attends over its slot's rows [0, span), the longest call's cache after the
//     forward rounded up to whole ForwardGraphs::kSpanRows, under a mask uploaded per forward
//     (causal rows built on the host, a call's own mask copied in).
// Key: (streams, rows, span). Every key with streams <= the pool's slots rounded up, rows <=
// max_rows and streams x rows <= max_total_rows is captured at load (Capture), so nothing is
// captured while serving; a batch no key fits runs eagerly, counted. A model's graphs compute
// everything any call may want (a TokenModel's logits of every row): one graph per key, at the
// price of an output head a call without logits did not need.
//
// Why one set of graphs for the whole pool rather than per request: a request's graphs were
// captured during its own decoding (a key replays from its third use) and died with it; the
// pool's addresses are fixed, so graphs captured over them at load serve every request, alone
// or batched, whichever slots it holds. The cost is a scatter of the new keys and values into
// the streams' slots and a gather of their spans per layer (KvCache::StoreAt on a slot-indexed
// view): the price of batching requests whose slots are not adjacent without a paged attention
// kernel.
//
// Emulated (LoadOptions::emulate_cuda_graphs): the keys, pads, static buffers and replays are
// the same, and a replay runs the captured body eagerly, so CPU tests see what a GPU replays.
#ifndef MULO_ENGINE_MODEL_POOL_GRAPHS_H_
#define MULO_ENGINE_MODEL_POOL_GRAPHS_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/kv_cache.h"

namespace mulo::engine {

class KvPool;

class PoolGraphs {
 public:
  // What the model's batched forward reads: `inputs`, each [streams, rows, width_i] in the
  // model's dtype; and per stream row its position, the cache row it writes and the rows of
  // its slot it may see.
  struct Inputs {
    std::vector<torch::Tensor> inputs;
    torch::Tensor positions;  // [streams, rows] int64
    torch::Tensor rows;       // [streams, rows] int64
    torch::Tensor mask;       // [streams, rows, span] bool
    int64_t span = 0;
  };
  // The model's forward over a slot-indexed view of the pool (KvPool::SlotIndexedView): its
  // outputs, each [streams, rows, width]. Graph-capturable: no host synchronisation.
  using Body = std::function<std::vector<torch::Tensor>(KvCache& view, const Inputs& in)>;

  struct Layout {
    std::vector<int64_t> input_widths;  // one per input
    torch::TensorOptions options;       // the inputs' dtype and device
    int64_t max_rows = 256;             // most new rows per stream a graph holds
    int64_t max_total_rows = 512;       // most streams x rows in one graph
  };

  // Captures every key's graph over `pool` (made with a scratch slot), or emulates them.
  // INVALID_ARGUMENT when the pool has no scratch slot; a key whose capture fails is left out
  // (its batches run eagerly) and counted.
  static StatusOr<std::shared_ptr<PoolGraphs>> Capture(const KvPool& pool, Layout layout,
                                                       Body body, bool emulated);

  // One cache's forward in a batch: its `inputs` [cache batch, n, width_i] (on the device),
  // positions [n] int64 (on the host), an optional mask [n, cache length + n] bool (undefined:
  // causal).
  struct Call {
    KvCache* cache = nullptr;
    std::vector<torch::Tensor> inputs;
    torch::Tensor positions;
    torch::Tensor mask;
  };
  // The graphs of the pool `cache` is a view of, or null (an unpooled cache, a pool without
  // graphs).
  static PoolGraphs* Of(const KvCache& cache);

  // Runs `calls` (distinct caches, checked by the caller) from the graph of their key and
  // advances each cache by its n. Per call, each body output's live rows [batch, n, width]:
  // views of the graph's outputs, valid until the next Run (copy them). nullopt when a cache
  // is not a view of this pool or no captured key fits (counted): nothing has moved, the
  // caller runs them eagerly.
  StatusOr<std::optional<std::vector<std::vector<torch::Tensor>>>> Run(
      const std::vector<Call>& calls);

  struct Counts {
    int64_t graphs = 0;           // keys captured at load
    int64_t failed_captures = 0;  // keys whose capture failed (their batches run eagerly)
    int64_t replays = 0;          // batches run from a graph
    int64_t calls = 0;            // calls those batches carried
    int64_t eager_batches = 0;    // batches no key fitted
    int64_t eager_calls = 0;      // calls those batches carried
    double capture_seconds = 0;   // the load-time capture
    int64_t memory_bytes = 0;     // static buffers, and on CUDA the graphs' pool
    void Add(const Counts& other);
  };
  Counts counts() const;

  PoolGraphs(const PoolGraphs&) = delete;
  PoolGraphs& operator=(const PoolGraphs&) = delete;
  ~PoolGraphs();

  // The least power of two >= n.
  static int64_t Bucket(int64_t n);

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t>;  // (streams, rows, span)
  struct Entry;
  PoolGraphs(const KvPool& pool, Layout layout, Body body, bool emulated);
  // Makes (and on a GPU captures) the graph of `key` over the pool.
  Status CaptureKey(const Key& key);

  const Layout layout_;
  const Body body_;
  const bool emulated_;
  const KvPool& pool_;  // owns these graphs
  std::map<Key, std::unique_ptr<Entry>> entries_;
  struct MemoryPool;
  std::unique_ptr<MemoryPool> memory_pool_;
  mutable std::mutex mu_;  // counts_ only: Run is called by one worker's loop at a time
  Counts counts_;
};

// For a batch whose graph key is missing (it failed to capture): each call run alone through
// `run`, which the graphs' lone key serves (their Fits holds it).
template <typename Output, typename Call, typename Run>
StatusOr<std::vector<Output>> RunEachAlone(const std::vector<Call>& calls, const Run& run) {
  std::vector<Output> outputs;
  for (const Call& call : calls) {
    MULO_ASSIGN_OR_RETURN(std::vector<Output> one, run(std::vector<Call>{call}));
    outputs.push_back(std::move(one[0]));
  }
  return outputs;
}

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_POOL_GRAPHS_H_
