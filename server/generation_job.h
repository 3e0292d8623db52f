// One Generate request on its way through the scheduler. The worker thread runs the decoding
// method and posts events (committed rows, then the final image, or an error) to a mailbox;
// the RPC thread takes them out and writes them to the stream, so only the RPC thread ever
// touches the gRPC writer. Cancelling the job's token stops decoding within one step.
#ifndef MULO_SERVER_GENERATION_JOB_H_
#define MULO_SERVER_GENERATION_JOB_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/decode/generate.h"
#include "mulo/v1/image_generation.pb.h"
#include "server/request_validation.h"
#include "server/scheduler.h"

namespace mulo::server {

struct JobEvent {
  std::optional<v1::GenerateResponse> response;  // rows or the final image
  bool done = false;                             // the last event of the job
  absl::Status status;                           // the job's outcome, with done
};

// Timestamps and results the RPC thread reads after the job is done (for metrics and logs).
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
  // ends DEADLINE_EXCEEDED with a message that names the limit.
  GenerationJob(ValidatedRequest request, engine::CancelToken::Clock::time_point deadline,
                bool has_deadline, bool joins_batches = true,
                absl::Duration max_decode_time = absl::InfiniteDuration());

  void Run(engine::ForwardBatcher* batcher) override;
  void Skip(const absl::Status& why) override;
  const engine::CancelToken& cancel() const override { return cancel_; }
  bool joins_batches() const override { return joins_batches_; }

  // Client went away or the server gives up: stop within one decoding step.
  void Cancel() { cancel_.Cancel(); }

  // The next event, waiting at most `timeout` for one.
  std::optional<JobEvent> NextEvent(absl::Duration timeout);

  const ValidatedRequest& request() const { return request_; }
  // Valid once the done event has been taken.
  JobRecord record() const;

 private:
  class RowStream;

  void Post(JobEvent event);

  const ValidatedRequest request_;
  const bool joins_batches_;
  const absl::Duration max_decode_time_;
  engine::CancelToken cancel_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
  JobRecord record_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_GENERATION_JOB_H_
