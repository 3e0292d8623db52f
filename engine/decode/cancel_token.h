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
  // client's deadline. A limit at or after the deadline is ignored: the deadline ends the
  // request first, with its own error.
  void LimitWorkUntil(Clock::time_point limit) {
    if (has_deadline_ && limit >= deadline_) return;
    work_limit_.store(limit.time_since_epoch().count(), std::memory_order_relaxed);
  }
  // Whether the work limit (rather than the client's deadline) has passed.
  bool WorkLimitPassed() const {
    const Clock::rep limit = work_limit_.load(std::memory_order_relaxed);
    // No clock read per decoding step when there is no limit.
    return limit != kNoLimit && Clock::now().time_since_epoch().count() >= limit;
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
  static constexpr Clock::rep kNoLimit = std::numeric_limits<Clock::rep>::max();
  std::atomic<Clock::rep> work_limit_{kNoLimit};  // clock ticks
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_CANCEL_TOKEN_H_
