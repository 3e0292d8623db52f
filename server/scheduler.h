// Bounded FIFO queue in front of a fixed pool of workers. Every request becomes a Job; each
// worker is one thread running an engine::EngineLoop, which steps up to max_batch jobs as
// fibers and runs their forwards as one batched forward per model (continuous batching); a
// finished job's place goes to the next queued one between two steps of the others.
// A full queue or a draining server refuses a job at once with UNAVAILABLE (retryable), the
// fast rejection users ask of Triton and TGI instead of unbounded waiting. A job whose
// deadline passes, or that is cancelled, while it waits is skipped without running, and its
// slot frees wherever it waits (SkipDeparted): a departed client never holds a place that a
// live one is refused for.
#ifndef MULO_SERVER_SCHEDULER_H_
#define MULO_SERVER_SCHEDULER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/decode/cancel_token.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/kv_pools.h"

namespace mulo::server {

class Job {
 public:
  virtual ~Job() = default;
  // Runs as a fiber of a worker's engine loop; must honour cancel() every decoding step.
  // `loop` (null when batching is off or the job runs alone) is the worker's: the job's
  // forwards go through it. `kv` (null when the worker has no KV-cache pools) holds the slots
  // reserved for kv_demand(), which the job's caches are taken from. Must not hold a lock
  // across a forward (the loop's other jobs run on the same thread).
  virtual void Run(engine::EngineLoop* loop, engine::KvReservation* kv) = 0;
  // The KV-cache slots the job may take (RequestKvDemand): it starts only once they are free
  // on its worker.
  virtual engine::KvDemand kv_demand() const { return {}; }
  // The job will never run: cancelled or out of time while queued, or the server stopped.
  virtual void Skip(const absl::Status& why) = 0;
  virtual const engine::CancelToken& cancel() const = 0;
  // Whether the job shares its worker with other batching jobs (continuous batching). A job
  // that does not is given its worker alone, as with batching off: run beside others on the
  // same core without sharing their forwards it only loses time to them (measured 7-14%).
  virtual bool joins_batches() const { return true; }
};

class Scheduler {
 public:
  struct Options {
    int workers = 1;
    int max_queue = 16;  // jobs waiting (not counting the ones running)
    // Runs first on every worker thread. Per-thread runtime settings belong here: LibTorch's
    // intra-op thread count (OpenMP) is a per-thread setting that new threads do not inherit.
    std::function<void()> on_worker_start;
    // Requests each worker decodes together (continuous batching); 1 turns batching off.
    int max_batch = 1;
    engine::EngineLoop::Options batching;
    // Called after every batched forward (metrics), on the worker's thread.
    engine::EngineLoop::Observer on_batch;
  };

  explicit Scheduler(Options options);
  // Stops accepting, skips whatever still waits (UNAVAILABLE) and joins the workers after
  // their current jobs.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues `job`, or refuses it with UNAVAILABLE (queue full, or draining). Jobs already
  // cancelled or out of time are skipped first, so they never count against the limit.
  absl::Status Submit(std::shared_ptr<Job> job);
  // Takes every queued job that was cancelled or whose deadline passed out of the queue,
  // wherever it waits, so that its slot frees now (a front end calls it when its client goes;
  // the skipping thread also looks every 50 ms). The jobs are skipped on the scheduler's own
  // thread: a caller may hold a lock that the job's Skip (its listener) takes.
  void SkipDeparted();

  // Gives each worker its KV-cache pools (one per worker, made at load, after the scheduler
  // starts): from then on a job starts only when its kv_demand() fits its worker's pools,
  // and waits in the queue until it does. Before, jobs run with caches of their own.
  void SetKvPools(std::vector<std::unique_ptr<engine::KvPools>> pools);
  // The workers' pools (empty before SetKvPools), for metrics; they live as long as the
  // scheduler.
  std::vector<const engine::KvPools*> kv_pools() const;

  // Drain: refuse new jobs from now on; queued and running ones still complete.
  void StopAccepting();
  // True once nothing is queued or running; false if `timeout` passed first.
  bool WaitIdle(absl::Duration timeout);

  int queue_depth() const;
  int running() const;

 private:
  // What runs on one worker's loop.
  struct WorkerState {
    int running = 0;
    bool alone = false;  // a job that does not join batches runs: nothing else starts
    std::unique_ptr<engine::KvPools> kv_pools;  // null until SetKvPools
  };
  class WorkerSource;  // the queue as one worker's loop sees it (scheduler.cc)
  // Whether the first queued job may start on `worker` now. Jobs start in queue order: a
  // job that must run alone waits for its worker's batch to finish, one whose KV-cache slots
  // are not free waits for jobs to end, and the jobs behind it wait for it.
  bool FrontCanStartLocked(const WorkerState& worker) const;
  // The job's end on its worker: counted, the idle and the waiting workers told.
  void Finished(WorkerState* worker, bool alone);
  // Moves the queued jobs that were cancelled or ran out of time to to_skip_ and wakes the
  // skipping thread.
  void TakeDepartedLocked();
  // The skipping thread: skips what TakeDepartedLocked moved, and looks for departed jobs
  // every 50 ms (a deadline passes without anyone telling).
  void SkipLoop();

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a job arrived or shutdown
  std::condition_variable idle_cv_;  // a job finished
  std::condition_variable skip_cv_;  // departed jobs to skip, or shutdown
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> to_skip_;  // departed, out of the queue, not skipped yet
  int skipping_ = 0;                           // being skipped now
  int running_ = 0;
  bool accepting_ = true;
  bool shutdown_ = false;
  std::vector<std::unique_ptr<engine::EngineLoop>> loops_;     // one per worker
  std::vector<std::unique_ptr<WorkerState>> worker_states_;        // one per worker, under mu_
  std::vector<std::thread> workers_;
  std::thread skipper_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_SCHEDULER_H_
