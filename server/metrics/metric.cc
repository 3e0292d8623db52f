#include "server/metrics/metric.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace mulo::server::metrics {
namespace {

// std::atomic<double>::fetch_add is C++20; a CAS loop is the C++17 equivalent.
void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount,
                                       std::memory_order_relaxed)) {
  }
}

}  // namespace

void Counter::Inc(double amount) {
  // `!(amount >= 0)` also rejects NaN.
  if (!(amount >= 0.0)) return;
  AtomicAdd(value_, amount);
}

void Counter::CollectInto(MetricSnapshot* snapshot) const { snapshot->value = Value(); }

void Gauge::Inc(double amount) { AtomicAdd(value_, amount); }

void Gauge::CollectInto(MetricSnapshot* snapshot) const { snapshot->value = Value(); }

Histogram::Histogram(std::vector<double> bucket_bounds)
    : bounds_(std::move(bucket_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  // Find the bucket before taking the lock. lower_bound gives the first bound >= value;
  // NaN compares false with everything, so it is routed to +Inf explicitly.
  size_t index = bounds_.size();
  if (!std::isnan(value)) {
    index = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  }
  absl::MutexLock lock(&mu_);
  ++counts_[index];
  sum_ += value;
}

void Histogram::CollectInto(MetricSnapshot* snapshot) const {
  absl::MutexLock lock(&mu_);
  snapshot->cumulative_counts.resize(bounds_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    running += counts_[i];
    snapshot->cumulative_counts[i] = running;
  }
  snapshot->count = running + counts_.back();
  snapshot->sum = sum_;
}

}  // namespace mulo::server::metrics
