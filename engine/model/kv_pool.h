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
// Fixed addresses are the point: the CUDA graphs of the model's batched forward over the pool
// (pool_graphs.h) are captured once at load and serve every request, whichever slots it holds.
// A pool made for them has one scratch slot more, which no request takes: the pad streams of a
// graph's batch bucket write there.
//
// A cache that outgrows its slots (a draft tree longer than the slack it was sized with) moves
// to memory of its own, as an unpooled cache grows, and is counted (overflows()): slower,
// never wrong. Its slots stay taken until the request ends, so the pool's accounting holds.
#ifndef MULO_ENGINE_MODEL_KV_POOL_H_
#define MULO_ENGINE_MODEL_KV_POOL_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/kv_cache.h"

namespace mulo::engine {

class KvPool;
class PoolGraphs;  // pool_graphs.h: batched CUDA graphs over a pool's slots
class RowGraphs;   // row_graphs.h: graphs of a whole ar row (or a chain of drafts)
class VerifyGraphs;  // verify_graphs.h: graphs of a chain's verification (speculative, SJD)

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
  // `slots` slots of `slot_rows` rows, laid out as `prototype` (an empty cache of the model:
  // its layers, heads, head width, dtype and device), and with `scratch_slot` one more for
  // batched graphs' pad streams. INVALID_ARGUMENT for fewer than one slot or row;
  // FAILED_PRECONDITION when the memory cannot be allocated.
  static StatusOr<std::shared_ptr<KvPool>> Make(const KvCache& prototype, int64_t slots,
                                                int64_t slot_rows, bool scratch_slot = false);
  // The bytes one slot of `slot_rows` rows takes for caches laid out as `prototype`.
  static int64_t SlotBytes(const KvCache& prototype, int64_t slot_rows);

  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  int64_t slots() const { return slots_; }  // the slots requests take (no scratch slot)
  int64_t slot_rows() const { return slot_rows_; }
  int64_t MemoryBytes() const;
  int64_t used_slots() const;
  // Caches that outgrew their slots and moved to memory of their own.
  int64_t overflows() const;

  // The batched graphs over this pool (set once, at load), or null.
  PoolGraphs* graphs() const { return graphs_.get(); }
  void SetGraphs(std::shared_ptr<PoolGraphs> graphs) { graphs_ = std::move(graphs); }
  // The graphs of whole ar rows, or of a drafter's chains, over this pool (set once, at
  // load), or null.
  RowGraphs* row_graphs() const { return row_graphs_.get(); }
  void SetRowGraphs(std::shared_ptr<RowGraphs> graphs) { row_graphs_ = std::move(graphs); }
  // The graphs of chains' verifications over this pool, one per shape (added at load;
  // VerifyGraphs::Of finds a shape's).
  const std::vector<std::shared_ptr<VerifyGraphs>>& verify_graphs() const {
    return verify_graphs_;
  }
  void AddVerifyGraphs(std::shared_ptr<VerifyGraphs> graphs) {
    verify_graphs_.push_back(std::move(graphs));
  }
  // The slot pad streams write to: slots() (made with scratch_slot), else -1.
  int64_t scratch_slot() const { return scratch_ ? slots_ : -1; }
  // A cache over the whole pool whose stream b is slot slot_index[b] ([batch] int64 on the
  // pool's device; KvCache::StoreAt on it scatters and gathers by slot): the cache a batched
  // graph runs over. Its length stays 0; the requests' own caches keep theirs.
  KvCache SlotIndexedView(const torch::Tensor& slot_index) const;

  // Whether `count` adjacent slots are free, and taking them (null when they are not).
  bool CanTake(int64_t count) const;
  std::shared_ptr<KvSlots> Take(int64_t count);

  // An empty cache of `batch` streams over the first `batch` of `slots` (taken from this
  // pool, batch <= slots->count()), holding them.
  KvCache CacheOver(const std::shared_ptr<KvSlots>& slots, int64_t batch);

 private:
  friend class KvSlots;
  friend class KvCache;
  KvPool(std::vector<torch::Tensor> keys, std::vector<torch::Tensor> values, int64_t slots,
         int64_t slot_rows, bool scratch);
  void Return(int64_t first, int64_t count);
  void CountOverflow();
  // First fit: the lowest run of `count` free slots, or -1. Under mu_.
  int64_t FindRunLocked(int64_t count) const;

  const std::vector<torch::Tensor> keys_, values_;  // per layer [slots, n_kv_head, rows, dim]
  const int64_t slots_, slot_rows_;
  const bool scratch_;
  std::shared_ptr<PoolGraphs> graphs_;
  std::shared_ptr<RowGraphs> row_graphs_;
  std::vector<std::shared_ptr<VerifyGraphs>> verify_graphs_;
  mutable std::mutex mu_;
  std::vector<bool> used_;
  int64_t used_count_ = 0;
  int64_t overflows_ = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_KV_POOL_H_
