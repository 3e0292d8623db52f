#include "server/scheduler.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace mulo::server {
namespace {

constexpr std::chrono::milliseconds kQueueRecheck(50);

}  // namespace

Scheduler::Scheduler(Options options) : options_(options) {
  skipper_ = std::thread([this] { SkipLoop(); });
  const int batch = std::max(1, options_.max_batch);
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    engine::ForwardBatcher* batcher = nullptr;
    if (batch > 1) {
      batchers_.push_back(
          std::make_unique<engine::ForwardBatcher>(options_.batching, options_.on_batch));
      batcher = batchers_.back().get();
    }
    worker_states_.push_back(std::make_unique<WorkerState>());
    WorkerState* state = worker_states_.back().get();
    for (int slot = 0; slot < batch; ++slot) {
      workers_.emplace_back([this, state, batcher] { WorkerLoop(state, batcher); });
    }
  }
}

Scheduler::~Scheduler() {
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    shutdown_ = true;
    left.swap(queue_);
  }
  work_cv_.notify_all();
  skip_cv_.notify_all();
  for (auto& job : left) job->Skip(absl::UnavailableError("server is shutting down"));
  for (auto& worker : workers_) worker.join();
  skipper_.join();
}

absl::Status Scheduler::Submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    TakeDepartedLocked();  // a departed job never counts against the limit
    if (!accepting_) {
      return absl::UnavailableError("server is draining; retry on another replica");
    }
    if (static_cast<int>(queue_.size()) >= options_.max_queue) {
      return absl::UnavailableError(absl::StrCat("queue is full (", options_.max_queue,
                                                 " waiting); retry with backoff"));
    }
    queue_.push_back(std::move(job));
  }
  // Not notify_one: the thread it wakes may belong to a worker that cannot take the job.
  work_cv_.notify_all();
  return absl::OkStatus();
}

void Scheduler::SkipDeparted() {
  std::lock_guard<std::mutex> lock(mu_);
  TakeDepartedLocked();
}

void Scheduler::TakeDepartedLocked() {
  bool took = false;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->cancel().Check().ok()) {
      ++it;
    } else {
      to_skip_.push_back(std::move(*it));
      it = queue_.erase(it);
      took = true;
    }
  }
  if (took) skip_cv_.notify_all();
}

void Scheduler::SkipLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    skip_cv_.wait_for(lock, kQueueRecheck, [this] { return shutdown_ || !to_skip_.empty(); });
    TakeDepartedLocked();
    if (to_skip_.empty()) {
      if (shutdown_) return;
      continue;
    }
    std::vector<std::shared_ptr<Job>> departed;
    departed.swap(to_skip_);
    const int count = static_cast<int>(departed.size());
    skipping_ += count;
    lock.unlock();
    for (const auto& job : departed) {
      job->Skip(job->cancel().Check().code() == engine::StatusCode::kDeadlineExceeded
                    ? absl::DeadlineExceededError("deadline exceeded while queued")
                    : absl::CancelledError("cancelled while queued"));
    }
    departed.clear();  // release the requests' memory before reporting idle
    lock.lock();
    skipping_ -= count;
    idle_cv_.notify_all();
  }
}

void Scheduler::StopAccepting() {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_ = false;
}

bool Scheduler::WaitIdle(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] {
    return queue_.empty() && running_ == 0 && to_skip_.empty() && skipping_ == 0;
  });
}

int Scheduler::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int Scheduler::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

bool Scheduler::FrontCanStartLocked(const WorkerState& worker, bool batching) const {
  if (queue_.empty()) return false;
  const Job& front = *queue_.front();
  // Out of time or cancelled: it is only skipped, so any thread takes it at once rather than
  // letting it wait (and hold back the queue) until a worker is free for it.
  if (!front.cancel().Check().ok()) return true;
  if (worker.alone) return false;
  return worker.running == 0 || (batching && front.joins_batches());
}

void Scheduler::WorkerLoop(WorkerState* worker, engine::ForwardBatcher* batcher) {
  if (options_.on_worker_start) options_.on_worker_start();
  const bool batching = batcher != nullptr;
  while (true) {
    std::shared_ptr<Job> job;
    bool alone = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (!shutdown_ && !FrontCanStartLocked(*worker, batching)) {
        if (queue_.empty()) {
          work_cv_.wait(lock);
        } else {
          // A queued job's deadline passes, or its client cancels, without a notification:
          // look again now and then so that it is skipped promptly.
          work_cv_.wait_for(lock, kQueueRecheck);
        }
      }
      if (queue_.empty()) return;  // shutdown with nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
      ++worker->running;
      alone = batching && !job->joins_batches() && job->cancel().Check().ok();
      worker->alone = alone;
    }
    const engine::Status ready = job->cancel().Check();
    if (!ready.ok()) {
      job->Skip(ready.code() == engine::StatusCode::kDeadlineExceeded
                    ? absl::DeadlineExceededError("deadline exceeded while queued")
                    : absl::CancelledError("cancelled while queued"));
    } else {
      job->Run(alone ? nullptr : batcher);
    }
    job.reset();  // release the request's memory before reporting idle
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      --worker->running;
      if (alone) worker->alone = false;
    }
    idle_cv_.notify_all();
    work_cv_.notify_all();  // this worker may now take a job that must run alone, or any
  }
}

}  // namespace mulo::server
