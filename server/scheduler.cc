#include "server/scheduler.h"

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace mulo::server {
namespace {

constexpr std::chrono::milliseconds kQueueRecheck(50);

}  // namespace

// The queue as one worker's engine loop sees it: the next job it may start, as a task that
// runs the job and then reports its end.
class Scheduler::WorkerSource : public engine::EngineLoop::Source {
 public:
  WorkerSource(Scheduler* scheduler, WorkerState* worker, engine::EngineLoop* loop)
      : scheduler_(scheduler), worker_(worker), loop_(loop) {}

  engine::EngineLoop::Task Next(int active) override {
    Scheduler& s = *scheduler_;
    std::shared_ptr<Job> job;
    std::shared_ptr<engine::KvReservation> kv;  // shared: a Task is copyable
    bool alone = false;
    {
      std::unique_lock<std::mutex> lock(s.mu_);
      s.TakeDepartedLocked();  // a departed job is skipped, never started
      while (!s.shutdown_ && !s.FrontCanStartLocked(*worker_)) {
        if (active > 0) return nullptr;  // the loop has jobs to step: never wait
        if (s.queue_.empty()) {
          s.work_cv_.wait(lock);
        } else {
          // A queued job's deadline passes, or its client cancels, without a notification:
          // look again now and then so that it is skipped promptly.
          s.work_cv_.wait_for(lock, kQueueRecheck);
        }
        s.TakeDepartedLocked();
      }
      if (s.queue_.empty() || (s.shutdown_ && !s.FrontCanStartLocked(*worker_))) return nullptr;
      job = std::move(s.queue_.front());
      s.queue_.pop_front();
      // FrontCanStartLocked saw the slots free, and only this worker's thread takes them.
      if (worker_->kv_pools != nullptr) kv = worker_->kv_pools->Reserve(job->kv_demand());
      ++s.running_;
      ++worker_->running;
      alone = loop_ != nullptr && !job->joins_batches();
      worker_->alone = alone;
    }
    engine::EngineLoop* loop = alone ? nullptr : loop_;
    return [this, job = std::move(job), kv = std::move(kv), loop, alone]() mutable {
      job->Run(loop, kv.get());
      kv.reset();   // the slots return before the next job's admission
      job.reset();  // release the request's memory before reporting idle
      scheduler_->Finished(worker_, alone);
    };
  }

 private:
  Scheduler* const scheduler_;
  WorkerState* const worker_;
  engine::EngineLoop* const loop_;  // null: batching off
};

Scheduler::Scheduler(Options options) : options_(options) {
  skipper_ = std::thread([this] { SkipLoop(); });
  const int batch = std::max(1, options_.max_batch);
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    loops_.push_back(std::make_unique<engine::EngineLoop>(options_.batching, options_.on_batch));
    worker_states_.push_back(std::make_unique<WorkerState>());
    WorkerState* state = worker_states_.back().get();
    engine::EngineLoop* loop = loops_.back().get();
    workers_.emplace_back([this, state, loop, batch] {
      if (options_.on_worker_start) options_.on_worker_start();
      // Batching off: the loop still runs the jobs, one at a time, their forwards direct.
      WorkerSource source(this, state, batch > 1 ? loop : nullptr);
      const engine::Status served = loop->Serve(source);
      if (!served.ok()) std::fprintf(stderr, "%s\n", served.ToString().c_str());
    });
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

void Scheduler::SetKvPools(std::vector<std::unique_ptr<engine::KvPools>> pools) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < pools.size() && i < worker_states_.size(); ++i) {
      worker_states_[i]->kv_pools = std::move(pools[i]);
    }
  }
  work_cv_.notify_all();
}

std::vector<const engine::KvPools*> Scheduler::kv_pools() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const engine::KvPools*> out;
  for (const auto& worker : worker_states_) {
    if (worker->kv_pools != nullptr) out.push_back(worker->kv_pools.get());
  }
  return out;
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

bool Scheduler::FrontCanStartLocked(const WorkerState& worker) const {
  if (queue_.empty()) return false;
  if (worker.alone) return false;
  const int batch = std::max(1, options_.max_batch);
  if (worker.running >= batch) return false;
  if (worker.running > 0 && !queue_.front()->joins_batches()) return false;
  return worker.kv_pools == nullptr || worker.kv_pools->CanReserve(queue_.front()->kv_demand());
}

void Scheduler::Finished(WorkerState* worker, bool alone) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    --worker->running;
    if (alone) worker->alone = false;
  }
  idle_cv_.notify_all();
  work_cv_.notify_all();  // a worker may now take a job that must run alone, or any
}

}  // namespace mulo::server
