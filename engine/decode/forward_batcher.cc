#include "engine/decode/forward_batcher.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <utility>
#include <vector>

namespace mulo::engine {
namespace {

// How each kind of model runs one call alone and several as one batched forward.
StatusOr<ForwardOutput> RunAlone(const TokenModel& model, const ForwardCall& c) {
  return model.Forward(*c.cache, c.embeddings, c.positions, c.mask, c.logits_mode);
}
StatusOr<std::vector<ForwardOutput>> RunTogether(const TokenModel& model,
                                                 const std::vector<ForwardCall>& calls,
                                                 PackedGemms gemms) {
  return model.ForwardBatch(calls, gemms);
}

StatusOr<torch::Tensor> RunAlone(const EagleHead& head, const HeadCall& c) {
  return head.Forward(*c.cache, c.token_embeddings, c.features, c.mask);
}
StatusOr<std::vector<torch::Tensor>> RunTogether(const EagleHead& head,
                                                 const std::vector<HeadCall>& calls,
                                                 PackedGemms gemms) {
  return head.ForwardBatch(calls, gemms);
}

StatusOr<torch::Tensor> RunAlone(const Resampler& resampler, const ResampleCall& c) {
  return c.drawn ? resampler.ApplyDrawn(c.ids, c.h, c.w) : resampler.Apply(c.ids, c.h, c.w);
}
StatusOr<std::vector<torch::Tensor>> RunTogether(const Resampler& resampler,
                                                 const std::vector<ResampleCall>& calls,
                                                 PackedGemms gemms) {
  return resampler.ApplyBatch(calls, gemms);
}

}  // namespace

struct ForwardBatcher::Pending {
  virtual ~Pending() = default;
  // Runs `group` (calls of this call's model, so of its kind) as one forward and stores each
  // call's result.
  virtual void RunGroup(const std::vector<Pending*>& group, PackedGemms gemms) = 0;

  const void* model = nullptr;  // calls of one model batch together
  Component component = Component::kTransformer;
  int64_t rows = 0;         // reported rows
  int64_t budget_rows = 0;  // rows counted against max_rows
  std::chrono::steady_clock::time_point arrived;
  bool done = false;
  // Each waiter sleeps on its own variable, woken only when its result is posted or when it
  // is first in the queue and may have to lead: with one shared variable every arrival would
  // wake every waiter (quadratic wake-ups per step on a loaded core).
  std::condition_variable cv;
};

template <typename Model, typename Call, typename Result>
struct ForwardBatcher::Queued : ForwardBatcher::Pending {
  Queued(const Model& m, const Call& c) : callee(m), call(c) { model = &m; }

  void RunGroup(const std::vector<Pending*>& group, PackedGemms gemms) override {
    if (group.size() == 1) {
      // Alone: exactly the forward a request without a batcher runs.
      result = RunAlone(callee, call);
      return;
    }
    std::vector<Call> calls;
    calls.reserve(group.size());
    for (Pending* p : group) calls.push_back(static_cast<Queued*>(p)->call);
    StatusOr<std::vector<Result>> outputs = RunTogether(callee, calls, gemms);
    for (size_t i = 0; i < group.size(); ++i) {
      auto* queued = static_cast<Queued*>(group[i]);
      if (outputs.ok()) {
        queued->result = std::move((*outputs)[i]);
      } else {
        queued->result = outputs.status();
      }
    }
  }

  const Model& callee;  // the model whose calls these are
  Call call;
  StatusOr<Result> result = InternalError("ForwardBatcher: the forward never ran");
};

ForwardBatcher::ForwardBatcher(Options options, Observer observer)
    : options_(options), observer_(std::move(observer)) {}

const char* ForwardBatcher::ComponentName(Component component) {
  switch (component) {
    case Component::kTransformer:
      return "transformer";
    case Component::kEagleHead:
      return "eagle_head";
    case Component::kResampler:
      return "resampler";
  }
  return "unknown";
}

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

bool ForwardBatcher::Alone() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seated_ <= 1;
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
  for (const Pending* p : queue_) rows += p->budget_rows;
  return rows >= options_.max_rows;
}

StatusOr<ForwardOutput> ForwardBatcher::Run(const TokenModel& model, const ForwardCall& call) {
  if (call.cache == nullptr) return InvalidArgumentError("ForwardBatcher::Run: no cache");
  MULO_RETURN_IF_ERROR(model.CheckForward(*call.cache, call.embeddings, call.positions, call.mask));
  Queued<TokenModel, ForwardCall, ForwardOutput> self(model, call);
  self.component = Component::kTransformer;
  self.rows = self.budget_rows = call.embeddings.size(0) * call.embeddings.size(1);
  Enqueue(&self);
  return std::move(self.result);
}

StatusOr<torch::Tensor> ForwardBatcher::Run(const EagleHead& head, const HeadCall& call) {
  MULO_RETURN_IF_ERROR(head.CheckForward(call));
  Queued<EagleHead, HeadCall, torch::Tensor> self(head, call);
  self.component = Component::kEagleHead;
  self.rows = self.budget_rows = call.features.size(0) * call.features.size(1);
  Enqueue(&self);
  return std::move(self.result);
}

StatusOr<torch::Tensor> ForwardBatcher::Run(const Resampler& resampler, const ResampleCall& call) {
  MULO_RETURN_IF_ERROR(resampler.CheckIds(call.ids, call.h, call.w, !call.drawn));
  Queued<Resampler, ResampleCall, torch::Tensor> self(resampler, call);
  self.component = Component::kResampler;
  self.rows = call.ids.size(0) * resampler.OutputRows(call.h) * resampler.OutputCols(call.w);
  self.budget_rows = 0;
  Enqueue(&self);
  return std::move(self.result);
}

void ForwardBatcher::Enqueue(Pending* self) {
  self->arrived = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(self);
  while (!self->done) {
    if (ReadyLocked(std::chrono::steady_clock::now())) {
      // Lead: take the whole queue, one forward per model in order of first arrival, each
      // split at max_rows.
      std::vector<std::vector<Pending*>> batches;
      std::map<const void*, size_t> open_batch;  // model -> its batch being filled
      std::vector<int64_t> batch_rows;
      for (Pending* p : queue_) {
        auto it = open_batch.find(p->model);
        if (it == open_batch.end() || batch_rows[it->second] + p->budget_rows > options_.max_rows) {
          open_batch[p->model] = batches.size();
          batches.emplace_back();
          batch_rows.push_back(0);
          it = open_batch.find(p->model);
        }
        batches[it->second].push_back(p);
        batch_rows[it->second] += p->budget_rows;
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
    if (!running_ && queue_.front() == self) {
      self->cv.wait_until(lock, self->arrived + options_.max_wait);
    } else {
      self->cv.wait(lock);
    }
  }
}

void ForwardBatcher::Execute(const std::vector<Pending*>& batch) {
  int64_t rows = 0;
  for (const Pending* p : batch) rows += p->rows;
  batch[0]->RunGroup(batch, options_.gemms);
  if (observer_) {
    observer_({batch[0]->component, static_cast<int64_t>(batch.size()), rows});
  }
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
