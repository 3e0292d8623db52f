// One generation on its way through the scheduler. The worker thread runs the decoding method
// and hands each event (committed rows with a preview when due, the final image, the end) to
// the job's listener, which the generation service gives it. Cancelling the job's token stops
// decoding within one step.
#ifndef MULO_SERVER_GENERATION_JOB_H_
#define MULO_SERVER_GENERATION_JOB_H_

#include <chrono>
#include <mutex>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/generation_event.h"
#include "server/request_validation.h"
#include "server/scheduler.h"

namespace mulo::server {

// Timestamps and results for metrics and logs, final once the done event was sent.
struct JobRecord {
  using Clock = std::chrono::steady_clock;
  Clock::time_point enqueued;
  std::optional<Clock::time_point> started, first_row, finished;
  engine::Stats stats;
  int64_t tokens = 0;
};

class GenerationJob : public Job {
 public:
  // `joins_batches`: whether the job joins its worker's batch (--batch_methods); when false
  // the scheduler gives it the worker alone. `max_decode_time`: the server's bound on the
  // job's decoding (--max_decode_time), counted from when a worker starts it; past it the job
  // ends DEADLINE_EXCEEDED with a message that names the limit. `listener` gets every event;
  // the done event is the last.
  GenerationJob(ValidatedRequest request, engine::CancelToken::Clock::time_point deadline,
                bool has_deadline, bool joins_batches, absl::Duration max_decode_time,
                GenerationListener listener);

  void Run(engine::EngineLoop* loop, engine::KvReservation* kv) override;
  engine::KvDemand kv_demand() const override { return kv_demand_; }
  void Skip(const absl::Status& why) override;
  const engine::CancelToken& cancel() const override { return cancel_; }
  bool joins_batches() const override { return joins_batches_; }

  // Client went away or the server gives up: stop within one decoding step.
  void Cancel() { cancel_.Cancel(); }

  const ValidatedRequest& request() const { return request_; }
  JobRecord record() const;

 private:
  class RowStream;

  void Post(GenerationEvent event);

  const ValidatedRequest request_;
  const bool joins_batches_;
  const engine::KvDemand kv_demand_;
  const absl::Duration max_decode_time_;
  const GenerationListener listener_;
  engine::CancelToken cancel_;
  mutable std::mutex mu_;
  JobRecord record_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_GENERATION_JOB_H_
