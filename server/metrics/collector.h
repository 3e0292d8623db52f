// A point-in-time copy of metric families (what a scrape serializes) and the Collector
// interface for metrics computed at scrape time rather than updated by the server (process
// metrics, for instance). Snapshots are plain values, so formatting runs without holding
// any metric lock.
#ifndef MULO_SERVER_METRICS_COLLECTOR_H_
#define MULO_SERVER_METRICS_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mulo::server::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// One child of a family: its label values (in the order of the family's label names) and
// its value(s).
struct MetricSnapshot {
  std::vector<std::string> label_values;
  // Counter and gauge.
  double value = 0.0;
  // Histogram: cumulative_counts[i] = observations <= bucket_bounds[i] (one entry per finite
  // bound); the +Inf bucket is `count`.
  std::vector<uint64_t> cumulative_counts;
  double sum = 0.0;
  uint64_t count = 0;
};

struct FamilySnapshot {
  std::string name;  // Full sample name, e.g. "mulo_requests_total".
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
  std::vector<double> bucket_bounds;  // Histogram only: finite, strictly increasing.
  std::vector<MetricSnapshot> metrics;
};

// Produces families at scrape time. Implementations must be thread-safe: concurrent scrapes
// call Collect concurrently.
class Collector {
 public:
  virtual ~Collector() = default;

  // The names of every family Collect may return. The registry reserves them at
  // registration so that they cannot collide with registered families; families Collect
  // returns under other names are dropped (a duplicate name would make Prometheus reject
  // the whole scrape).
  virtual std::vector<std::string> Describe() const = 0;

  virtual std::vector<FamilySnapshot> Collect() const = 0;
};

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_COLLECTOR_H_
