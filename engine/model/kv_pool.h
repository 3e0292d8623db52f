// A KV-cache pool: one model's cache memory on one worker, allocated once at load as fixed
// slots, from which every request takes its caches (vLLM's KV-cache pool, with fixed slots
// where vLLM pages).
//
// A slot holds one stream's rows (a guidance stream: a request with classifier-free guidance
// takes two) for every layer: keys and values [slots, n_kv_head, slot_rows, head_dim] per
// layer, of which a request's cache is the view of its adjacent slots. Why fixed slots rather
// than paged blocks (docs/design.md, "The KV-cache pool"): every request of a family writes
// the same number of rows (the condition, the image's tokens, at most a draft tree more), so a
// slot sized for the longest wastes at most a draft tree's rows, and a cache that is one
// contiguous view keeps the attention LibTorch's plain kernels and CUDA graphs read.
//
// Fixed addresses are the point: the CUDA graphs of a run of slots (forward_graphs.h) are
// kept with the pool, so the next request on the same slots replays what an earlier one
// captured instead of capturing again.
//
// A cache that outgrows its slots (a draft tree longer than the slack it was sized with) moves
// to memory of its own, as an unpooled cache grows, and is counted (overflows()): slower,
// never wrong. Its slots stay taken until the request ends, so the pool's accounting holds.
#ifndef MULO_ENGINE_MODEL_KV_POOL_H_
#define MULO_ENGINE_MODEL_KV_POOL_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/kv_cache.h"

namespace mulo::engine {

class KvPool;

// A run of adjacent slots taken from a pool; they return to it when the last holder (the
// reservation, the caches over them) lets go.
class KvSlots {
 public:
  KvSlots(std::shared_ptr<KvPool> pool, int64_t first, int64_t count)
      : pool_(std::move(pool)), first_(first), count_(count) {}
  ~KvSlots();
  KvSlots(const KvSlots&) = delete;
  KvSlots& operator=(const KvSlots&) = delete;

  KvPool& pool() const { return *pool_; }
  int64_t first() const { return first_; }
  int64_t count() const { return count_; }

 private:
  std::shared_ptr<KvPool> pool_;
  const int64_t first_, count_;
};

class KvPool : public std::enable_shared_from_this<KvPool> {
 public:
  // Graphs for a run of slots (a DecoderOnlyModel's, with its settings), or none.
  using GraphsFactory = std::function<std::shared_ptr<ForwardGraphs>()>;

  // `slots` slots of `slot_rows` rows, laid out as `prototype` (an empty cache of the model:
  // its layers, heads, head width, dtype and device). `graphs` (optional) makes the graphs
  // of each run of slots on its first use. INVALID_ARGUMENT for fewer than one slot or row;
  // FAILED_PRECONDITION when the memory cannot be allocated.
  static StatusOr<std::shared_ptr<KvPool>> Make(const KvCache& prototype, int64_t slots,
                                                int64_t slot_rows, GraphsFactory graphs = nullptr);
  // The bytes one slot of `slot_rows` rows takes for caches laid out as `prototype`.
  static int64_t SlotBytes(const KvCache& prototype, int64_t slot_rows);

  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  int64_t slots() const { return slots_; }
  int64_t slot_rows() const { return slot_rows_; }
  int64_t MemoryBytes() const;
  int64_t used_slots() const;
  // Caches that outgrew their slots and moved to memory of their own.
  int64_t overflows() const;

  // The graphs of every run of slots used so far.
  std::vector<std::shared_ptr<ForwardGraphs>> run_graphs() const;

  // Whether `count` adjacent slots are free, and taking them (null when they are not).
  bool CanTake(int64_t count) const;
  std::shared_ptr<KvSlots> Take(int64_t count);

  // An empty cache of `batch` streams over the first `batch` of `slots` (taken from this
  // pool, batch <= slots->count()), holding them; with the run's graphs when the pool makes
  // graphs.
  KvCache CacheOver(const std::shared_ptr<KvSlots>& slots, int64_t batch);

 private:
  friend class KvSlots;
  friend class KvCache;
  KvPool(std::vector<torch::Tensor> keys, std::vector<torch::Tensor> values, int64_t slot_rows,
         GraphsFactory graphs);
  void Return(int64_t first, int64_t count);
  void CountOverflow();
  // First fit: the lowest run of `count` free slots, or -1. Under mu_.
  int64_t FindRunLocked(int64_t count) const;

  const std::vector<torch::Tensor> keys_, values_;  // per layer [slots, n_kv_head, rows, dim]
  const int64_t slots_, slot_rows_;
  const GraphsFactory make_graphs_;
  mutable std::mutex mu_;
  std::vector<bool> used_;
  int64_t used_count_ = 0;
  int64_t overflows_ = 0;
  // The graphs of each run of slots (first, count): they hold the run's addresses, so they
  // serve every request that takes the same run.
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<ForwardGraphs>> graphs_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_KV_POOL_H_
