#include "engine/decode/forward_batcher.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <utility>
#include <vector>

namespace mulo::engine {

struct ForwardBatcher::Pending {
  const Transformer* model = nullptr;
  ForwardCall call;
  int64_t rows = 0;
  std::chrono::steady_clock::time_point arrived;
  bool done = false;
  StatusOr<ForwardOutput> result = InternalError("ForwardBatcher: the forward never ran");
  // Each waiter sleeps on its own variable, woken only when its result is posted or when it
  // is first in the queue and may have to lead: with one shared variable every arrival would
  // wake every waiter (quadratic wake-ups per step on a loaded core).
  std::condition_variable cv;
};

ForwardBatcher::ForwardBatcher(Options options, Observer observer)
    : options_(options), observer_(std::move(observer)) {}

ForwardBatcher::Seat::Seat(ForwardBatcher* batcher) : batcher_(batcher) {
  std::lock_guard<std::mutex> lock(batcher_->mu_);
  ++batcher_->seated_;
}

ForwardBatcher::Seat::~Seat() {
  std::lock_guard<std::mutex> lock(batcher_->mu_);
  --batcher_->seated_;
  // The queue may now hold every remaining seated request: its first waiter decides.
  batcher_->WakeFrontLocked();
}

void ForwardBatcher::WakeFrontLocked() {
  if (!queue_.empty()) queue_.front()->cv.notify_one();
}

ForwardBatcher::Counters ForwardBatcher::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

bool ForwardBatcher::ReadyLocked(std::chrono::steady_clock::time_point now) const {
  if (queue_.empty() || running_) return false;
  // Every seated request is waiting: nothing else can join this batch.
  if (static_cast<int64_t>(queue_.size()) >= seated_) return true;
  if (now >= queue_.front()->arrived + options_.max_wait) return true;
  int64_t rows = 0;
  for (const Pending* p : queue_) rows += p->rows;
  return rows >= options_.max_rows;
}

StatusOr<ForwardOutput> ForwardBatcher::Run(const Transformer& model, const ForwardCall& call) {
  if (call.cache == nullptr) return InvalidArgumentError("ForwardBatcher::Run: no cache");
  MULO_RETURN_IF_ERROR(
      model.CheckForward(*call.cache, call.embeddings, call.positions, call.mask));
  Pending self;
  self.model = &model;
  self.call = call;
  self.rows = call.embeddings.size(0) * call.embeddings.size(1);
  self.arrived = std::chrono::steady_clock::now();

  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&self);
  while (!self.done) {
    if (ReadyLocked(std::chrono::steady_clock::now())) {
      // Lead: take the whole queue, one forward per model in order of first arrival, each
      // split at max_rows.
      std::vector<std::vector<Pending*>> batches;
      std::map<const Transformer*, size_t> open_batch;  // model -> its batch being filled
      std::vector<int64_t> batch_rows;
      for (Pending* p : queue_) {
        auto it = open_batch.find(p->model);
        if (it == open_batch.end() || batch_rows[it->second] + p->rows > options_.max_rows) {
          open_batch[p->model] = batches.size();
          batches.emplace_back();
          batch_rows.push_back(0);
          it = open_batch.find(p->model);
        }
        batches[it->second].push_back(p);
        batch_rows[it->second] += p->rows;
      }
      queue_.clear();
      running_ = true;
      lock.unlock();
      for (const auto& batch : batches) Execute(batch);
      lock.lock();
      running_ = false;
      WakeFrontLocked();  // forwards queued meanwhile
      continue;
    }
    if (!running_ && queue_.front() == &self) {
      self.cv.wait_until(lock, self.arrived + options_.max_wait);
    } else {
      self.cv.wait(lock);
    }
  }
  return std::move(self.result);
}

void ForwardBatcher::Execute(const std::vector<Pending*>& batch) {
  int64_t rows = 0;
  for (const Pending* p : batch) rows += p->rows;
  if (batch.size() == 1) {
    // Alone: exactly the forward a request without a batcher runs.
    const ForwardCall& c = batch[0]->call;
    batch[0]->result =
        batch[0]->model->Forward(*c.cache, c.embeddings, c.positions, c.mask, c.logits_mode);
  } else {
    std::vector<ForwardCall> calls;
    calls.reserve(batch.size());
    for (const Pending* p : batch) calls.push_back(p->call);
    StatusOr<std::vector<ForwardOutput>> outputs = batch[0]->model->ForwardBatch(calls, options_.gemms);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (outputs.ok()) {
        batch[i]->result = std::move((*outputs)[i]);
      } else {
        batch[i]->result = outputs.status();
      }
    }
  }
  if (observer_) observer_({static_cast<int64_t>(batch.size()), rows});
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.forwards;
    counters_.calls += static_cast<int64_t>(batch.size());
    counters_.max_calls = std::max<int64_t>(counters_.max_calls, batch.size());
    for (Pending* p : batch) {
      p->done = true;
      p->cv.notify_one();
    }
  }
}

}  // namespace mulo::engine
