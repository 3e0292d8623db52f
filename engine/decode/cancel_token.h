// Cooperative cancellation: decoding methods call Check() once per decoding step and stop
// (releasing their KV caches as they unwind) when it is not OK. Thread-safe: the server
// cancels from its RPC thread while a worker decodes.
#ifndef MULO_ENGINE_DECODE_CANCEL_TOKEN_H_
#define MULO_ENGINE_DECODE_CANCEL_TOKEN_H_

#include <atomic>
#include <chrono>
#include <limits>

#include "engine/core/status.h"

namespace mulo::engine {

class CancelToken {
 public:
  using Clock = std::chrono::steady_clock;

  CancelToken() = default;
  explicit CancelToken(Clock::time_point deadline) : deadline_(deadline), has_deadline_(true) {}

  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }

  // The server's own bound on a request's work (from when its decoding starts), on top of the
  // client's deadline.
  void LimitWorkUntil(Clock::time_point limit) {
    work_limit_.store(limit.time_since_epoch().count(), std::memory_order_relaxed);
  }
  // Whether the work limit (rather than the client's deadline) has passed.
  bool WorkLimitPassed() const {
    return Clock::now().time_since_epoch().count() >=
           work_limit_.load(std::memory_order_relaxed);
  }

  // OK, CANCELLED or DEADLINE_EXCEEDED.
  Status Check() const {
    if (cancelled_.load(std::memory_order_relaxed)) {
      return CancelledError("request cancelled");
    }
    if (has_deadline_ && Clock::now() >= deadline_) {
      return DeadlineExceededError("request deadline exceeded");
    }
    if (WorkLimitPassed()) return DeadlineExceededError("request work limit exceeded");
    return OkStatus();
  }

 private:
  std::atomic<bool> cancelled_{false};
  Clock::time_point deadline_{};
  bool has_deadline_ = false;
  // Clock ticks; the largest value means no limit.
  std::atomic<Clock::rep> work_limit_{std::numeric_limits<Clock::rep>::max()};
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_CANCEL_TOKEN_H_
