#include "engine/model/kv_pool.h"

#include <exception>
#include <string>

namespace mulo::engine {

KvSlots::~KvSlots() { pool_->Return(first_, count_); }

int64_t KvPool::SlotBytes(const KvCache& prototype, int64_t slot_rows) {
  const torch::Tensor k = prototype.Keys(0);  // [batch, n_kv_head, 0, head_dim]
  return 2 * prototype.num_layers() * k.size(1) * slot_rows * k.size(3) * k.element_size();
}

StatusOr<std::shared_ptr<KvPool>> KvPool::Make(const KvCache& prototype, int64_t slots,
                                               int64_t slot_rows, bool scratch_slot) {
  if (slots < 1 || slot_rows < 1) {
    return InvalidArgumentError("KvPool: needs at least one slot of one row, got " +
                                std::to_string(slots) + " of " + std::to_string(slot_rows));
  }
  std::vector<torch::Tensor> keys, values;
  try {
    at::NoGradGuard no_grad;
    for (int64_t layer = 0; layer < prototype.num_layers(); ++layer) {
      const torch::Tensor k = prototype.Keys(layer);
      const std::vector<int64_t> shape = {slots + (scratch_slot ? 1 : 0), k.size(1), slot_rows,
                                          k.size(3)};
      keys.push_back(torch::zeros(shape, k.options()));
      values.push_back(torch::zeros(shape, k.options()));
    }
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (const auto newline = message.find('\n'); newline != std::string::npos) message.resize(newline);
    return FailedPreconditionError("KvPool: cannot allocate " + std::to_string(slots) +
                                  " slots of " + std::to_string(slot_rows) + " rows (" +
                                  std::to_string(slots * SlotBytes(prototype, slot_rows)) +
                                  " bytes): " + message);
  }
  return std::shared_ptr<KvPool>(
      new KvPool(std::move(keys), std::move(values), slots, slot_rows, scratch_slot));
}

KvPool::KvPool(std::vector<torch::Tensor> keys, std::vector<torch::Tensor> values,
               int64_t slots, int64_t slot_rows, bool scratch)
    : keys_(std::move(keys)),
      values_(std::move(values)),
      slots_(slots),
      slot_rows_(slot_rows),
      scratch_(scratch),
      used_(static_cast<size_t>(slots_), false) {}

int64_t KvPool::MemoryBytes() const {
  int64_t bytes = 0;
  for (size_t i = 0; i < keys_.size(); ++i) {
    bytes += keys_[i].numel() * keys_[i].element_size();
    bytes += values_[i].numel() * values_[i].element_size();
  }
  return bytes;
}

int64_t KvPool::used_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_count_;
}

int64_t KvPool::overflows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return overflows_;
}

int64_t KvPool::FindRunLocked(int64_t count) const {
  int64_t run = 0;
  for (int64_t i = 0; i < slots_; ++i) {
    run = used_[i] ? 0 : run + 1;
    if (run == count) return i - count + 1;
  }
  return -1;
}

bool KvPool::CanTake(int64_t count) const {
  std::lock_guard<std::mutex> lock(mu_);
  return count >= 1 && FindRunLocked(count) >= 0;
}

std::shared_ptr<KvSlots> KvPool::Take(int64_t count) {
  int64_t first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = count >= 1 ? FindRunLocked(count) : -1;
    if (first < 0) return nullptr;
    for (int64_t i = first; i < first + count; ++i) used_[i] = true;
    used_count_ += count;
  }
  return std::make_shared<KvSlots>(shared_from_this(), first, count);
}

void KvPool::Return(int64_t first, int64_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int64_t i = first; i < first + count; ++i) used_[i] = false;
  used_count_ -= count;
}

void KvPool::CountOverflow() {
  std::lock_guard<std::mutex> lock(mu_);
  ++overflows_;
}

KvCache KvPool::CacheOver(const std::shared_ptr<KvSlots>& slots, int64_t batch) {
  std::vector<torch::Tensor> keys, values;
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    keys.push_back(keys_[layer].narrow(0, slots->first(), batch));
    values.push_back(values_[layer].narrow(0, slots->first(), batch));
  }
  return KvCache(std::move(keys), std::move(values), slots);
}

KvCache KvPool::SlotIndexedView(const torch::Tensor& slot_index) const {
  KvCache view(keys_, values_, nullptr);
  view.batch_ = slot_index.size(0);
  view.slot_index_ = slot_index;
  return view;
}

}  // namespace mulo::engine
