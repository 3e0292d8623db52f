// Cooperative cancellation: decoding methods call Check() once per decoding step and stop
// (releasing their KV caches as they unwind) when it is not OK. Thread-safe: the server
// cancels from its RPC thread while a worker decodes.
#ifndef MULO_ENGINE_DECODE_CANCEL_TOKEN_H_
#define MULO_ENGINE_DECODE_CANCEL_TOKEN_H_

#include <atomic>
#include <chrono>

#include "engine/core/status.h"

namespace mulo::engine {

class CancelToken {
 public:
  using Clock = std::chrono::steady_clock;

  CancelToken() = default;
  explicit CancelToken(Clock::time_point deadline) : deadline_(deadline), has_deadline_(true) {}

  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }

  // OK, CANCELLED or DEADLINE_EXCEEDED.
  Status Check() const {
    if (cancelled_.load(std::memory_order_relaxed)) {
      return CancelledError("request cancelled");
    }
    if (has_deadline_ && Clock::now() >= deadline_) {
      return DeadlineExceededError("request deadline exceeded");
    }
    return OkStatus();
  }

 private:
  std::atomic<bool> cancelled_{false};
  Clock::time_point deadline_{};
  bool has_deadline_ = false;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_CANCEL_TOKEN_H_
