// Per-request key/value cache of a transformer, gpt-fast style: for every layer one key and
// one value tensor [batch, n_kv_head, capacity, head_dim], of which rows [0, length) are live.
//
// Keys are stored after the position encoding is applied, so rows can be moved (Compact)
// without recomputing anything: a row remembers the position it was computed at. Speculative
// methods use Truncate to roll back rejected drafts and Compact to keep an accepted tree path.
#ifndef MULO_ENGINE_MODEL_KV_CACHE_H_
#define MULO_ENGINE_MODEL_KV_CACHE_H_

#include <torch/types.h>

#include <memory>
#include <utility>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

class ForwardGraphs;  // forward_graphs.h: CUDA graphs captured over one cache's tensors
class KvPool;         // kv_pool.h: fixed slots that caches are views of
class KvSlots;

// One transformer forward through a cache, for cost projections (tools/gpu/project.py): which
// model ran, how many streams, how many new rows over how many cached ones, graph or eager.
struct ForwardEvent {
  const void* model = nullptr;  // the Transformer that owns the cache
  int64_t batch = 0;
  int64_t new_tokens = 0;
  int64_t context = 0;  // cached rows before the forward (condition positions included)
  bool graph = false;
  // ATen operators dispatched by an eager forward alone (0 unless an OpCounting scope counts,
  // and for replayed graphs and batched forwards): what a method dispatches outside its
  // forwards is the request's count minus these.
  int64_t dispatched_ops = 0;
  bool captured = false;  // a graph forward whose graph was captured by this call
};
using ForwardTrace = std::vector<ForwardEvent>;

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t batch, int64_t n_kv_head, int64_t head_dim,
          int64_t capacity, const torch::TensorOptions& options);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return batch_; }
  int64_t num_layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t MemoryBytes() const;
  // Whether the cache is a view of a pool's slots (kv_pool.h) rather than memory of its own.
  bool pooled() const { return slots_ != nullptr; }
  // The pool a pooled cache's slots belong to and its first slot there (null / -1 otherwise).
  KvPool* pool() const;
  int64_t first_slot() const;

  // Writes k/v [batch, n_kv_head, n, head_dim] of `layer` at rows [length, length + n) and
  // returns that layer's keys and values over [0, length + n). The length itself moves only
  // with Advance(n), after every layer has stored its rows. Grows the capacity if needed.
  std::pair<torch::Tensor, torch::Tensor> Store(int64_t layer, const torch::Tensor& k,
                                                const torch::Tensor& v);
  void Advance(int64_t n) { length_ += n; }

  // The graph-safe form of Store (no host synchronisation, no growth): writes k/v at the cache
  // rows `rows` ([n] int64 on the cache's device) and returns the layer's rows [0, span). The
  // caller guarantees rows[i] < span <= capacity(); rows past the live length are stale and
  // must be masked out of attention.
  // On a slot-indexed view of a pool (KvPool::SlotIndexedView, its batched graphs' cache)
  // stream b of k / v is written to the pool's slot slot_index[b] at rows[b] ([batch, n]),
  // and the result is those slots' rows [0, span) gathered: [batch, n_kv_head, span, dim].
  std::pair<torch::Tensor, torch::Tensor> StoreAt(int64_t layer, const torch::Tensor& rows,
                                                  const torch::Tensor& k, const torch::Tensor& v,
                                                  int64_t span);

  // The graph-safe form of Compact (no host synchronisation, the length unchanged): moves
  // rows `from` to rows `to` ([batch, n] int64 on the device; stream b's in its own slot on a
  // slot-indexed view, stream 0's for every stream otherwise) in every layer, all rows read
  // before any is written. A draft tree's verify graph keeps its accepted path with it
  // (tree_verify_graphs.h); the caller then sets the length (Compact of rows in place moves
  // nothing).
  void MoveRowsAt(const torch::Tensor& from, const torch::Tensor& to);

  // Drops every row at or after `n` (rollback of rejected tokens).
  Status Truncate(int64_t n);

  // Keeps exactly the rows `keep` (strictly increasing, each < length), in that order; the
  // cache length becomes keep.size(). Typical use: keep the prefix plus an accepted tree path.
  Status Compact(const std::vector<int64_t>& keep);

  // Where a layer's rows live, for ops that write and read the cache in place (the fused
  // kernels, engine/kernels/fused_ops.h): the layer's whole key and value tensors [streams or
  // a pool's slots, n_kv_head, capacity, head_dim], and on a slot-indexed view each stream's
  // slot ([batch] int64 on the device; undefined otherwise: stream b is row b).
  struct LayerStorage {
    torch::Tensor keys, values, slot_index;
  };
  LayerStorage Storage(int64_t layer) const { return {keys_[layer], values_[layer], slot_index_}; }
  // Makes room for `n` rows after the length, as Store does before it writes them.
  void Reserve(int64_t n) {
    if (length_ + n > capacity_) Grow(length_ + n);
  }

  // The keys of `layer` over [0, length) (for tests and inspection).
  torch::Tensor Keys(int64_t layer) const;
  torch::Tensor Values(int64_t layer) const;

  // CUDA graphs of this cache's forwards (see forward_graphs.h), or null when they are off.
  // Graphs hold the addresses of the cache's tensors; growing the cache replaces the tensors
  // and bumps generation(), which tells the graphs to start over.
  ForwardGraphs* graphs() const { return graphs_.get(); }
  int64_t generation() const { return generation_; }
  void set_graphs(std::shared_ptr<ForwardGraphs> graphs) { graphs_ = std::move(graphs); }

  // When set, every transformer forward through this cache appends a ForwardEvent here
  // (the trace outlives the cache; one request's caches may share it).
  ForwardTrace* trace() const { return trace_; }
  void set_trace(ForwardTrace* trace) { trace_ = trace; }

 private:
  friend class KvPool;
  // A cache over slots of a pool: `keys` / `values` per layer are views [batch, n_kv_head,
  // capacity, head_dim] of them; `slots` keeps them taken while the cache lives.
  KvCache(std::vector<torch::Tensor> keys, std::vector<torch::Tensor> values,
          std::shared_ptr<KvSlots> slots);
  void Grow(int64_t min_capacity);

  int64_t batch_;
  int64_t capacity_;
  int64_t length_ = 0;
  int64_t generation_ = 0;
  std::vector<torch::Tensor> keys_;
  std::vector<torch::Tensor> values_;
  std::shared_ptr<ForwardGraphs> graphs_;
  ForwardTrace* trace_ = nullptr;
  std::shared_ptr<KvSlots> slots_;  // null: the cache's own memory
  // A slot-indexed view: keys_ / values_ are a pool's whole tensors and stream b lives in slot
  // slot_index_[b] ([batch] int64 on the device). Undefined otherwise.
  torch::Tensor slot_index_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_KV_CACHE_H_
