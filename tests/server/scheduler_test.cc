// Scheduler unit tests: per-worker start hook, FIFO order, bounded queue, draining, and jobs
// whose deadline passes or that are cancelled while queued.
#include "server/scheduler.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/kv_pool.h"
#include "gtest/gtest.h"

namespace mulo::server {
namespace {

// Records what happened to it in the fixture's log; a gated job blocks in Run() until the
// fixture opens the gate.
class RecordingJob : public Job {
 public:
  RecordingJob(int id, std::vector<int>* ran, std::mutex* mu, const std::atomic<bool>* gate,
               std::optional<engine::CancelToken::Clock::time_point> deadline)
      : id_(id),
        ran_(ran),
        mu_(mu),
        gate_(gate),
        cancel_(deadline ? engine::CancelToken(*deadline) : engine::CancelToken()) {}

  void Run(engine::EngineLoop* loop, engine::KvReservation* kv) override {
    loop_ = loop;
    kv_ = kv;
    started_ = true;
    // Waits as a decoding job does, pausing between its steps so that the loop steps the
    // others (with no loop it has its worker alone).
    while (gate_ != nullptr && !gate_->load()) {
      if (loop != nullptr) loop->StepDone();
      std::this_thread::yield();
    }
    std::lock_guard<std::mutex> lock(*mu_);
    ran_->push_back(id_);
  }
  void Skip(const absl::Status& why) override {
    std::lock_guard<std::mutex> lock(*mu_);
    skipped_ = why;
  }
  const engine::CancelToken& cancel() const override { return cancel_; }
  bool joins_batches() const override { return joins_batches_; }
  engine::KvDemand kv_demand() const override { return kv_demand_; }
  engine::CancelToken& mutable_cancel() { return cancel_; }
  void set_kv_demand(engine::KvDemand demand) { kv_demand_ = std::move(demand); }
  engine::KvReservation* kv() const { return kv_; }
  void set_joins_batches(bool joins) { joins_batches_ = joins; }

  bool started() const { return started_; }
  engine::EngineLoop* loop() const { return loop_; }
  absl::Status skipped() const {
    std::lock_guard<std::mutex> lock(*mu_);
    return skipped_;
  }

 private:
  const int id_;
  std::vector<int>* ran_;
  std::mutex* mu_;
  const std::atomic<bool>* gate_;
  std::atomic<engine::EngineLoop*> loop_{nullptr};
  std::atomic<engine::KvReservation*> kv_{nullptr};
  engine::KvDemand kv_demand_;
  std::atomic<bool> started_{false};
  engine::CancelToken cancel_;
  bool joins_batches_ = true;
  absl::Status skipped_ = absl::OkStatus();
};

class SchedulerTest : public ::testing::Test {
 protected:
  std::shared_ptr<RecordingJob> Job(int id) {
    return std::make_shared<RecordingJob>(id, &ran_, &mu_, nullptr, std::nullopt);
  }
  // Blocks its worker until OpenGate(); returns once it runs, so later jobs queue behind it.
  std::shared_ptr<RecordingJob> StartGatedJob(Scheduler& scheduler, int id) {
    auto job = std::make_shared<RecordingJob>(id, &ran_, &mu_, &gate_, std::nullopt);
    EXPECT_TRUE(scheduler.Submit(job).ok());
    while (!job->started()) std::this_thread::yield();
    return job;
  }
  // Blocks its worker until `gate` opens (not started here).
  std::shared_ptr<RecordingJob> JobGatedBy(int id, const std::atomic<bool>* gate) {
    return std::make_shared<RecordingJob>(id, &ran_, &mu_, gate, std::nullopt);
  }
  std::shared_ptr<RecordingJob> JobWithDeadline(int id, std::chrono::milliseconds from_now) {
    return std::make_shared<RecordingJob>(id, &ran_, &mu_, nullptr,
                                          engine::CancelToken::Clock::now() + from_now);
  }
  void OpenGateAndWait(Scheduler& scheduler) {
    gate_ = true;
    ASSERT_TRUE(scheduler.WaitIdle(absl::Seconds(5)));
  }
  std::vector<int> ran() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }

 private:
  std::mutex mu_;
  std::vector<int> ran_;
  std::atomic<bool> gate_{false};
};

TEST_F(SchedulerTest, WorkerStartHookRunsOnceOnEveryWorkerThread) {
  std::mutex mu;
  std::set<std::thread::id> hook_threads;
  std::atomic<int> calls{0};
  {
    Scheduler::Options options;
    options.workers = 3;
    options.on_worker_start = [&] {
      std::lock_guard<std::mutex> lock(mu);
      hook_threads.insert(std::this_thread::get_id());
      ++calls;
    };
    Scheduler scheduler(options);
    ASSERT_TRUE(scheduler.WaitIdle(absl::Seconds(5)));
  }  // joins the workers, so every hook has run
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(hook_threads.size(), 3u);
  EXPECT_EQ(hook_threads.count(std::this_thread::get_id()), 0u);
}

TEST_F(SchedulerTest, OneWorkerRunsJobsInArrivalOrder) {
  Scheduler scheduler({1, 16, nullptr});
  StartGatedJob(scheduler, 0);
  for (int id = 1; id <= 5; ++id) ASSERT_TRUE(scheduler.Submit(Job(id)).ok());
  EXPECT_EQ(scheduler.queue_depth(), 5);
  EXPECT_EQ(scheduler.running(), 1);
  OpenGateAndWait(scheduler);
  EXPECT_EQ(ran(), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(scheduler.running(), 0);
}

// With max_batch = 3 one worker runs three jobs at once, all handed that worker's engine loop;
// the fourth waits for a slot. Without batching the loop is null.
TEST_F(SchedulerTest, ABatchingWorkerRunsMaxBatchJobsSharingOneBatcher) {
  Scheduler::Options options{1, 16, nullptr};
  options.max_batch = 3;
  Scheduler scheduler(options);
  std::vector<std::shared_ptr<RecordingJob>> gated;
  for (int id = 0; id < 3; ++id) gated.push_back(StartGatedJob(scheduler, id));
  ASSERT_TRUE(scheduler.Submit(Job(3)).ok());
  EXPECT_EQ(scheduler.running(), 3);
  EXPECT_EQ(scheduler.queue_depth(), 1);
  ASSERT_NE(gated[0]->loop(), nullptr);
  EXPECT_EQ(gated[1]->loop(), gated[0]->loop());
  EXPECT_EQ(gated[2]->loop(), gated[0]->loop());
  OpenGateAndWait(scheduler);
  EXPECT_EQ(ran().size(), 4u);

  Scheduler plain({1, 16, nullptr});
  auto job = Job(9);
  ASSERT_TRUE(plain.Submit(job).ok());
  ASSERT_TRUE(plain.WaitIdle(absl::Seconds(5)));
  EXPECT_TRUE(job->started());
  EXPECT_EQ(job->loop(), nullptr);
}

// A job that does not join batches waits for its worker's batch to finish, runs with no
// loop and nothing beside it, and the jobs queued behind it wait for it (queue order).
TEST_F(SchedulerTest, AJobThatDoesNotBatchGetsItsWorkerAlone) {
  Scheduler::Options options{1, 16, nullptr};
  options.max_batch = 3;
  Scheduler scheduler(options);
  std::atomic<bool> batch_gate{false}, alone_gate{false};
  auto batched = JobGatedBy(0, &batch_gate);
  auto alone = JobGatedBy(1, &alone_gate);
  alone->set_joins_batches(false);
  auto behind = Job(2);
  ASSERT_TRUE(scheduler.Submit(batched).ok());
  while (!batched->started()) std::this_thread::yield();
  ASSERT_TRUE(scheduler.Submit(alone).ok());
  ASSERT_TRUE(scheduler.Submit(behind).ok());
  // Two of the worker's three threads are free, yet neither job may start beside the batch.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(alone->started());
  EXPECT_FALSE(behind->started());
  EXPECT_EQ(scheduler.running(), 1);
  EXPECT_EQ(scheduler.queue_depth(), 2);

  batch_gate = true;
  while (!alone->started()) std::this_thread::yield();
  EXPECT_EQ(alone->loop(), nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(behind->started()) << "a job started beside one that runs alone";
  EXPECT_EQ(scheduler.running(), 1);

  alone_gate = true;
  ASSERT_TRUE(scheduler.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(ran(), (std::vector<int>{0, 1, 2}));
  EXPECT_NE(behind->loop(), nullptr);
  EXPECT_EQ(behind->loop(), batched->loop());
}

// A job that would have to wait for its worker's batch is still skipped as soon as its
// deadline passes, not when the batch ends (its caller must not outlive the deadline).
TEST_F(SchedulerTest, AQueuedJobOutOfTimeIsSkippedWhileTheBatchStillRuns) {
  Scheduler::Options options{1, 16, nullptr};
  options.max_batch = 3;
  Scheduler scheduler(options);
  auto batched = StartGatedJob(scheduler, 0);
  auto late = JobWithDeadline(1, std::chrono::milliseconds(30));
  late->set_joins_batches(false);
  ASSERT_TRUE(scheduler.Submit(late).ok());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (late->skipped().ok() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(late->skipped().code(), absl::StatusCode::kDeadlineExceeded) << late->skipped();
  EXPECT_FALSE(late->started());
  EXPECT_EQ(scheduler.running(), 1);  // the batch still runs
  OpenGateAndWait(scheduler);
  EXPECT_EQ(ran(), (std::vector<int>{0}));
}

TEST_F(SchedulerTest, FullQueueAndDrainingRefuseWithUnavailable) {
  Scheduler scheduler({1, 2, nullptr});
  StartGatedJob(scheduler, 0);
  ASSERT_TRUE(scheduler.Submit(Job(1)).ok());
  ASSERT_TRUE(scheduler.Submit(Job(2)).ok());
  const absl::Status full = scheduler.Submit(Job(3));
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos) << full;

  scheduler.StopAccepting();
  const absl::Status draining = scheduler.Submit(Job(4));
  EXPECT_EQ(draining.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(draining.message().find("draining"), std::string::npos) << draining;
  // What was accepted before the drain still completes.
  OpenGateAndWait(scheduler);
  EXPECT_EQ(ran(), (std::vector<int>{0, 1, 2}));
}

TEST_F(SchedulerTest, JobsOutOfTimeOrCancelledWhileQueuedAreSkippedNotRun) {
  Scheduler scheduler({1, 16, nullptr});
  StartGatedJob(scheduler, 0);
  auto late = JobWithDeadline(1, std::chrono::milliseconds(1));
  auto cancelled = Job(2);
  auto in_time = JobWithDeadline(3, std::chrono::minutes(5));
  for (const auto& job : {late, cancelled, in_time}) ASSERT_TRUE(scheduler.Submit(job).ok());
  cancelled->mutable_cancel().Cancel();  // the client goes away while it waits
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // late's deadline passes
  OpenGateAndWait(scheduler);
  EXPECT_EQ(ran(), (std::vector<int>{0, 3}));
  EXPECT_EQ(late->skipped().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(late->started());
  EXPECT_EQ(cancelled->skipped().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(cancelled->started());
  EXPECT_TRUE(in_time->skipped().ok());
}

// What `job` was skipped with, waiting up to 5 s for it (OK: never skipped).
absl::Status WaitForSkip(const RecordingJob& job) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (job.skipped().ok() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return job.skipped();
}

TEST_F(SchedulerTest, DepartedJobsFreeTheirSlotsWhereverTheyWait) {
  // One worker busy, one live job at the front of a 16-slot queue and 15 jobs behind it whose
  // clients leave: the next 15 live calls are admitted at once, the departed are skipped at
  // once (not when they reach the front), and the live ones run in order.
  Scheduler scheduler({1, 16, nullptr});
  StartGatedJob(scheduler, 0);
  ASSERT_TRUE(scheduler.Submit(Job(1)).ok());
  std::vector<std::shared_ptr<RecordingJob>> departed;
  for (int i = 0; i < 15; ++i) {
    departed.push_back(Job(100 + i));
    ASSERT_TRUE(scheduler.Submit(departed.back()).ok());
  }
  EXPECT_EQ(scheduler.queue_depth(), 16);
  EXPECT_EQ(scheduler.Submit(Job(99)).code(), absl::StatusCode::kUnavailable);
  for (const auto& job : departed) job->mutable_cancel().Cancel();
  scheduler.SkipDeparted();
  EXPECT_EQ(scheduler.queue_depth(), 1);  // out of the queue at once
  for (const auto& job : departed) {  // skipped on the scheduler's thread, soon
    EXPECT_EQ(WaitForSkip(*job).code(), absl::StatusCode::kCancelled);
    EXPECT_FALSE(job->started());
  }
  for (int i = 0; i < 15; ++i) ASSERT_TRUE(scheduler.Submit(Job(2 + i)).ok()) << i;
  EXPECT_EQ(scheduler.Submit(Job(99)).code(), absl::StatusCode::kUnavailable);
  OpenGateAndWait(scheduler);
  std::vector<int> expected = {0, 1};
  for (int i = 0; i < 15; ++i) expected.push_back(2 + i);
  EXPECT_EQ(ran(), expected);
}

TEST_F(SchedulerTest, SkipDepartedMayBeCalledUnderTheLockItsJobsSkipTakes) {
  // A gRPC reactor calls SkipDeparted (through ClientGone) holding its own lock, which its
  // job's Skip (the listener) takes: skipping happens on the scheduler's thread, so no
  // deadlock.
  Scheduler scheduler({1, 16, nullptr});
  StartGatedJob(scheduler, 0);
  std::mutex reactor;
  class LockingJob : public RecordingJob {
   public:
    LockingJob(std::mutex* reactor, std::vector<int>* ran, std::mutex* mu)
        : RecordingJob(7, ran, mu, nullptr, std::nullopt), reactor_(reactor) {}
    void Skip(const absl::Status& why) override {
      std::lock_guard<std::mutex> lock(*reactor_);
      RecordingJob::Skip(why);
    }

   private:
    std::mutex* reactor_;
  };
  std::vector<int> ran;
  std::mutex mu;
  auto job = std::make_shared<LockingJob>(&reactor, &ran, &mu);
  ASSERT_TRUE(scheduler.Submit(job).ok());
  {
    std::lock_guard<std::mutex> lock(reactor);
    job->mutable_cancel().Cancel();
    scheduler.SkipDeparted();  // would deadlock if it skipped here
  }
  EXPECT_EQ(WaitForSkip(*job).code(), absl::StatusCode::kCancelled);
  OpenGateAndWait(scheduler);
}

// A worker's KV-cache pool of `slots` slots for the model at `model` (any address: the pool
// only keys on it).
std::unique_ptr<engine::KvPools> PoolsOf(const void* model, int64_t slots) {
  auto pools = std::make_unique<engine::KvPools>();
  engine::KvCache prototype(/*n_layer=*/1, /*batch=*/1, /*n_kv_head=*/1, /*head_dim=*/2,
                            /*capacity=*/1, torch::dtype(torch::kFloat32));
  auto pool = engine::KvPool::Make(prototype, slots, /*slot_rows=*/4);
  EXPECT_TRUE(pool.ok());
  pools->Add("family", "target", model, std::move(*pool));
  return pools;
}

// Admission is by free KV-cache slots: with a pool of 4 slots, two jobs of 2 slots run and
// the third waits in the queue (though max_batch would admit it) until one ends; a job of 1
// slot behind it waits too (queue order). A job's reservation reaches Run and gives caches
// over the pool's slots; the slots return when the job ends.
TEST_F(SchedulerTest, AJobStartsOnlyWhenItsKvCacheSlotsAreFree) {
  Scheduler::Options options{1, 2, nullptr};
  options.max_batch = 8;
  Scheduler scheduler(options);
  const int model = 0;
  scheduler.SetKvPools([&] {
    std::vector<std::unique_ptr<engine::KvPools>> pools;
    pools.push_back(PoolsOf(&model, 4));
    return pools;
  }());
  const engine::KvDemand two{{{&model, 2}}}, one{{{&model, 1}}};
  std::atomic<bool> first_gate{false}, second_gate{false};
  auto first = JobGatedBy(0, &first_gate), second = JobGatedBy(1, &second_gate);
  auto third = Job(2), fourth = Job(3);
  first->set_kv_demand(two);
  second->set_kv_demand(two);
  third->set_kv_demand(two);
  fourth->set_kv_demand(one);
  ASSERT_TRUE(scheduler.Submit(first).ok());
  ASSERT_TRUE(scheduler.Submit(second).ok());
  while (!first->started() || !second->started()) std::this_thread::yield();
  ASSERT_TRUE(scheduler.Submit(third).ok());
  ASSERT_TRUE(scheduler.Submit(fourth).ok());
  ASSERT_NE(first->kv(), nullptr);
  std::optional<engine::KvCache> cache = first->kv()->Take(&model, 2);
  ASSERT_TRUE(cache.has_value());
  EXPECT_TRUE(cache->pooled());
  EXPECT_EQ(cache->batch(), 2);
  cache.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(third->started()) << "started with no free slots";
  EXPECT_FALSE(fourth->started());
  EXPECT_EQ(scheduler.running(), 2);
  EXPECT_EQ(scheduler.queue_depth(), 2);
  EXPECT_EQ(scheduler.kv_pools().at(0)->usage().at(0).used, 4);
  // Waiting for slots holds a queue place: a full queue still answers UNAVAILABLE at once.
  EXPECT_EQ(scheduler.Submit(Job(9)).code(), absl::StatusCode::kUnavailable);

  // The first job's end frees its two slots: the third takes them, then the fourth its one,
  // while the second still runs.
  first_gate = true;
  while (ran().size() < 3) std::this_thread::yield();
  EXPECT_EQ(ran(), (std::vector<int>{0, 2, 3}));
  second_gate = true;
  ASSERT_TRUE(scheduler.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(ran(), (std::vector<int>{0, 2, 3, 1}));
  EXPECT_EQ(scheduler.kv_pools().at(0)->usage().at(0).used, 0);
}

TEST_F(SchedulerTest, ASubmitSkipsDepartedJobsBeforeCountingTheQueue) {
  // Without anyone calling SkipDeparted: a cancelled job behind a live one does not make the
  // next Submit see a full queue.
  Scheduler scheduler({1, 2, nullptr});
  StartGatedJob(scheduler, 0);
  ASSERT_TRUE(scheduler.Submit(Job(1)).ok());
  auto gone = Job(2);
  ASSERT_TRUE(scheduler.Submit(gone).ok());
  gone->mutable_cancel().Cancel();
  EXPECT_TRUE(scheduler.Submit(Job(3)).ok());
  EXPECT_EQ(WaitForSkip(*gone).code(), absl::StatusCode::kCancelled);
  OpenGateAndWait(scheduler);
  EXPECT_EQ(ran(), (std::vector<int>{0, 1, 3}));
}

}  // namespace
}  // namespace mulo::server
