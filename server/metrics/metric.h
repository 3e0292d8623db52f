// The three metric kinds. One object is one time series (one child of a family); all
// methods are thread-safe. Objects are created by their family (Family::WithLabels) and live
// as long as the Registry, so callers may keep references to them.
#ifndef MULO_SERVER_METRICS_METRIC_H_
#define MULO_SERVER_METRICS_METRIC_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/collector.h"

namespace mulo::server::metrics {

// Monotonically increasing value. Lock-free.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `amount`. A negative or NaN amount is ignored (as prometheus-cpp does): a counter
  // that went down would read as a process restart to rate(), and crashing the server over
  // a metric is worse than dropping one bad increment.
  void Inc(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

  void CollectInto(MetricSnapshot* snapshot) const;

 private:
  std::atomic<double> value_{0.0};
};

// Value that can go up and down. Lock-free.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Inc(double amount = 1.0);
  void Dec(double amount = 1.0) { Inc(-amount); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

  void CollectInto(MetricSnapshot* snapshot) const;

 private:
  std::atomic<double> value_{0.0};
};

// Distribution over fixed buckets. A mutex (rather than per-bucket atomics) guards the
// counts so every snapshot is consistent: the +Inf bucket always equals _count and _sum
// covers exactly the counted observations. An Observe is a few nanoseconds under an
// uncontended absl::Mutex, far below the cost of anything the server measures.
class Histogram {
 public:
  // `bucket_bounds`: finite upper bounds, strictly increasing (the registry validates them).
  explicit Histogram(std::vector<double> bucket_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts `value` in the first bucket whose bound is >= value (the `le` semantics). NaN
  // lands in the +Inf bucket only.
  void Observe(double value);

  const std::vector<double>& bucket_bounds() const { return bounds_; }
  void CollectInto(MetricSnapshot* snapshot) const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  // Non-cumulative: counts_[i] for bounds_[i], counts_.back() for +Inf.
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  double sum_ ABSL_GUARDED_BY(mu_) = 0.0;
};

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_METRIC_H_
