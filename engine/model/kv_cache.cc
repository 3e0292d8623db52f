#include "engine/model/kv_cache.h"

#include <algorithm>
#include <string>

#include "engine/core/device_upload.h"
#include "engine/core/torch_guard.h"
#include "engine/model/kv_pool.h"

namespace mulo::engine {

KvCache::KvCache(int64_t n_layer, int64_t batch, int64_t n_kv_head, int64_t head_dim,
                 int64_t capacity, const torch::TensorOptions& options)
    : batch_(batch), capacity_(std::max<int64_t>(capacity, 1)) {
  at::NoGradGuard no_grad;
  for (int64_t i = 0; i < n_layer; ++i) {
    keys_.push_back(torch::zeros({batch, n_kv_head, capacity_, head_dim}, options));
    values_.push_back(torch::zeros({batch, n_kv_head, capacity_, head_dim}, options));
  }
}

KvCache::KvCache(std::vector<torch::Tensor> keys, std::vector<torch::Tensor> values,
                 std::shared_ptr<KvSlots> slots)
    : batch_(keys.at(0).size(0)),
      capacity_(keys.at(0).size(2)),
      keys_(std::move(keys)),
      values_(std::move(values)),
      slots_(std::move(slots)) {}

KvPool* KvCache::pool() const { return slots_ != nullptr ? &slots_->pool() : nullptr; }
int64_t KvCache::first_slot() const { return slots_ != nullptr ? slots_->first() : -1; }

int64_t KvCache::MemoryBytes() const {
  int64_t bytes = 0;
  for (size_t i = 0; i < keys_.size(); ++i) {
    bytes += keys_[i].numel() * keys_[i].element_size();
    bytes += values_[i].numel() * values_[i].element_size();
  }
  return bytes;
}

void KvCache::Grow(int64_t min_capacity) {
  // Doubling keeps appends amortised O(1); speculative trees overshoot the image length a bit.
  const int64_t capacity = std::max(min_capacity, 2 * capacity_);
  for (size_t i = 0; i < keys_.size(); ++i) {
    for (auto* t : {&keys_[i], &values_[i]}) {
      auto sizes = t->sizes().vec();
      sizes[2] = capacity;
      torch::Tensor bigger = torch::zeros(sizes, t->options());
      bigger.narrow(2, 0, length_).copy_(t->narrow(2, 0, length_));
      *t = bigger;
    }
  }
  capacity_ = capacity;
  ++generation_;  // graphs captured the old tensors' addresses
  if (slots_ != nullptr) {
    // Out of the pool's slots: the slots' graphs stay theirs, for the next request on them;
    // this cache runs eagerly from here on.
    slots_->pool().CountOverflow();
    graphs_ = nullptr;
  }
}

std::pair<torch::Tensor, torch::Tensor> KvCache::Store(int64_t layer, const torch::Tensor& k,
                                                       const torch::Tensor& v) {
  const int64_t n = k.size(2);
  if (length_ + n > capacity_) Grow(length_ + n);
  keys_[layer].narrow(2, length_, n).copy_(k);
  values_[layer].narrow(2, length_, n).copy_(v);
  return {keys_[layer].narrow(2, 0, length_ + n), values_[layer].narrow(2, 0, length_ + n)};
}

std::pair<torch::Tensor, torch::Tensor> KvCache::StoreAt(int64_t layer, const torch::Tensor& rows,
                                                         const torch::Tensor& k,
                                                         const torch::Tensor& v, int64_t span) {
  if (slot_index_.defined()) {
    // Each stream's rows go to its own slot: one scatter over (slot, head, row), then one
    // gather of the streams' slots for attention (a copy of their spans: the price of
    // batching requests whose slots are not adjacent without a paged attention kernel).
    const int64_t streams = k.size(0), heads = k.size(1), n = k.size(2);
    const auto slot = slot_index_.view({streams, 1, 1});
    const auto head = torch::arange(heads, rows.options()).view({1, heads, 1});
    const auto row = rows.view({streams, 1, n});
    keys_[layer].index_put_({slot, head, row}, k);
    values_[layer].index_put_({slot, head, row}, v);
    return {keys_[layer].narrow(2, 0, span).index_select(0, slot_index_),
            values_[layer].narrow(2, 0, span).index_select(0, slot_index_)};
  }
  keys_[layer].index_copy_(2, rows, k);
  values_[layer].index_copy_(2, rows, v);
  return {keys_[layer].narrow(2, 0, span), values_[layer].narrow(2, 0, span)};
}

void KvCache::MoveRowsAt(const torch::Tensor& from, const torch::Tensor& to) {
  at::NoGradGuard no_grad;
  for (std::vector<torch::Tensor>* tensors : {&keys_, &values_}) {
    for (torch::Tensor& t : *tensors) {
      if (slot_index_.defined()) {
        // As StoreAt: each stream's rows in its own slot, indexed by (slot, head, row).
        const int64_t streams = from.size(0), n = from.size(1);
        const auto slot = slot_index_.view({streams, 1, 1});
        const auto head = torch::arange(t.size(1), from.options()).view({1, t.size(1), 1});
        const torch::Tensor moved = t.index({slot, head, from.view({streams, 1, n})});
        t.index_put_({slot, head, to.view({streams, 1, n})}, moved);
      } else {
        const torch::Tensor moved = t.index_select(2, from[0]);
        t.index_copy_(2, to[0], moved);
      }
    }
  }
}

Status KvCache::Truncate(int64_t n) {
  if (n < 0 || n > length_) {
    return OutOfRangeError("KvCache::Truncate: length " + std::to_string(n) +
                           " is outside [0, " + std::to_string(length_) + "]");
  }
  length_ = n;
  return OkStatus();
}

Status KvCache::Compact(const std::vector<int64_t>& keep) {
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] < 0 || keep[i] >= length_ || (i > 0 && keep[i] <= keep[i - 1])) {
      return InvalidArgumentError(
          "KvCache::Compact: rows must be strictly increasing and below the length " +
          std::to_string(length_));
    }
  }
  // Rows already in place (keep[i] == i) stay; only the tail after them moves.
  size_t first_moved = 0;
  while (first_moved < keep.size() && keep[first_moved] == static_cast<int64_t>(first_moved)) {
    ++first_moved;
  }
  return GuardTorch("KvCache::Compact", [&]() -> Status {
    at::NoGradGuard no_grad;
    if (first_moved < keep.size()) {
      std::vector<int64_t> moved(keep.begin() + first_moved, keep.end());
      auto index = Upload(torch::tensor(moved, torch::dtype(torch::kInt64)), keys_[0].device());
      const int64_t count = static_cast<int64_t>(moved.size());
      for (size_t i = 0; i < keys_.size(); ++i) {
        for (auto* t : {&keys_[i], &values_[i]}) {
          // index_select copies first, so overlapping source and destination rows are safe.
          torch::Tensor rows = t->index_select(2, index);
          t->narrow(2, static_cast<int64_t>(first_moved), count).copy_(rows);
        }
      }
    }
    length_ = static_cast<int64_t>(keep.size());
    return OkStatus();
  });
}

torch::Tensor KvCache::Keys(int64_t layer) const { return keys_[layer].narrow(2, 0, length_); }
torch::Tensor KvCache::Values(int64_t layer) const {
  return values_[layer].narrow(2, 0, length_);
}

}  // namespace mulo::engine
