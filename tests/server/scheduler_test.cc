// Scheduler unit tests: per-worker start hook, FIFO order, bounded queue, draining, and jobs
// whose deadline passes while queued.
#include "server/scheduler.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace mulo::server {
namespace {

// Records what happened to it; optionally blocks in Run() until released.
class RecordingJob : public Job {
 public:
  RecordingJob(int id, std::vector<int>* ran, std::mutex* mu, std::atomic<bool>* gate = nullptr,
               std::optional<engine::CancelToken::Clock::time_point> deadline = std::nullopt)
      : id_(id),
        ran_(ran),
        mu_(mu),
        gate_(gate),
        cancel_(deadline ? engine::CancelToken(*deadline) : engine::CancelToken()) {}

  void Run() override {
    started_ = true;
    while (gate_ != nullptr && !gate_->load()) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(*mu_);
    ran_->push_back(id_);
  }
  void Skip(const absl::Status& why) override {
    std::lock_guard<std::mutex> lock(*mu_);
    skipped_ = why;
  }
  const engine::CancelToken& cancel() const override { return cancel_; }

  bool started() const { return started_; }
  absl::Status skipped() const {
    std::lock_guard<std::mutex> lock(*mu_);
    return skipped_;
  }

 private:
  const int id_;
  std::vector<int>* ran_;
  std::mutex* mu_;
  std::atomic<bool>* gate_;
  std::atomic<bool> started_{false};
  engine::CancelToken cancel_;
  absl::Status skipped_ = absl::OkStatus();
};

void WaitStarted(const RecordingJob& job) {
  while (!job.started()) std::this_thread::yield();
}

TEST(SchedulerTest, WorkerStartHookRunsOnceOnEveryWorkerThread) {
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

TEST(SchedulerTest, OneWorkerRunsJobsInArrivalOrder) {
  std::mutex mu;
  std::vector<int> ran;
  std::atomic<bool> gate{false};
  Scheduler scheduler({1, 16, nullptr});
  auto first = std::make_shared<RecordingJob>(0, &ran, &mu, &gate);
  ASSERT_TRUE(scheduler.Submit(first).ok());
  WaitStarted(*first);  // the rest queue behind it
  for (int id = 1; id <= 5; ++id) {
    ASSERT_TRUE(scheduler.Submit(std::make_shared<RecordingJob>(id, &ran, &mu)).ok());
  }
  EXPECT_EQ(scheduler.queue_depth(), 5);
  EXPECT_EQ(scheduler.running(), 1);
  gate = true;
  ASSERT_TRUE(scheduler.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(scheduler.running(), 0);
}

TEST(SchedulerTest, FullQueueAndDrainingRefuseWithUnavailable) {
  std::mutex mu;
  std::vector<int> ran;
  std::atomic<bool> gate{false};
  Scheduler scheduler({1, 2, nullptr});
  auto busy = std::make_shared<RecordingJob>(0, &ran, &mu, &gate);
  ASSERT_TRUE(scheduler.Submit(busy).ok());
  WaitStarted(*busy);
  ASSERT_TRUE(scheduler.Submit(std::make_shared<RecordingJob>(1, &ran, &mu)).ok());
  ASSERT_TRUE(scheduler.Submit(std::make_shared<RecordingJob>(2, &ran, &mu)).ok());
  const absl::Status full = scheduler.Submit(std::make_shared<RecordingJob>(3, &ran, &mu));
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos) << full;

  scheduler.StopAccepting();
  const absl::Status draining = scheduler.Submit(std::make_shared<RecordingJob>(4, &ran, &mu));
  EXPECT_EQ(draining.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(draining.message().find("draining"), std::string::npos) << draining;
  // What was accepted before the drain still completes.
  gate = true;
  ASSERT_TRUE(scheduler.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2}));
}

TEST(SchedulerTest, JobsOutOfTimeOrCancelledWhileQueuedAreSkippedNotRun) {
  std::mutex mu;
  std::vector<int> ran;
  std::atomic<bool> gate{false};
  Scheduler scheduler({1, 16, nullptr});
  auto busy = std::make_shared<RecordingJob>(0, &ran, &mu, &gate);
  ASSERT_TRUE(scheduler.Submit(busy).ok());
  WaitStarted(*busy);
  auto late = std::make_shared<RecordingJob>(
      1, &ran, &mu, nullptr,
      engine::CancelToken::Clock::now() + std::chrono::milliseconds(1));
  ASSERT_TRUE(scheduler.Submit(late).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // its deadline passes in queue
  gate = true;
  ASSERT_TRUE(scheduler.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(ran, (std::vector<int>{0}));
  EXPECT_EQ(late->skipped().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(late->started());
}

}  // namespace
}  // namespace mulo::server
