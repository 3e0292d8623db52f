// What the playground's live panel shows (GET /v1/live): requests running and queued, images
// per second over the last minute and each method's mean accepted length over the last few
// minutes, from the images the service finished. Kept by the server rather than read back from
// Prometheus so that the page reads it from its own origin, with its own key, and draws it
// without a query language.
#ifndef MULO_SERVER_LIVE_FIGURES_H_
#define MULO_SERVER_LIVE_FIGURES_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace mulo::server {

class LiveFigures {
 public:
  using Clock = std::chrono::steady_clock;

  // One method's figures over the window.
  struct Method {
    std::string method;
    int64_t images = 0;
    // Accepted drafts per verify step, and tokens per target forward, over the window's images
    // (ratios of sums, as the Prometheus rates of the same counters).
    double mean_accepted_length = 0.0;
    double step_compression = 0.0;
  };
  struct Snapshot {
    int running = 0, queued = 0;   // filled by the caller (the scheduler's)
    double window_seconds = 0.0;   // the span `methods` covers
    double images_per_second = 0;  // over the last minute (or the figures' life, if shorter)
    std::vector<Method> methods;   // by name
  };

  // `window`: how far back the methods' figures reach; `started`: the figures' birth (the
  // rate's span while younger than a minute).
  explicit LiveFigures(Clock::duration window = std::chrono::minutes(5),
                       Clock::time_point started = Clock::now());

  // One finished image of `method`: its tokens, target forwards, accepted drafts and verify
  // steps.
  struct Image {
    std::string method;
    int64_t tokens = 0, target_forwards = 0, accepted = 0, verify_steps = 0;
  };
  void Record(Image image, Clock::time_point when = Clock::now());
  Snapshot Read(Clock::time_point now = Clock::now()) const;

 private:
  struct Finished {
    Clock::time_point at;
    Image image;
  };
  // Drops what the window no longer covers; at most kMaxImages are kept however busy the
  // server is (the oldest go first).
  void Prune(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr size_t kMaxImages = 100000;

  const Clock::duration window_;
  const Clock::time_point started_;
  mutable absl::Mutex mu_;
  std::deque<Finished> finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mulo::server

#endif  // MULO_SERVER_LIVE_FIGURES_H_
