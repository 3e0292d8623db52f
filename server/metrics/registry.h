// The metrics registry: owns metric families and scrape-time collectors and produces a
// snapshot of all of them for exposition (exposition.h).
//
//   Registry registry;
//   absl::StatusOr<CounterFamily*> requests = registry.AddCounter(
//       "mulo_requests_total", "Requests by outcome.", {"model", "method", "code"});
//   if (!requests.ok()) return requests.status();
//   Counter& ok = (*requests)->WithLabels({"synth", "ar", "OK"});  // keep the reference
//   ok.Inc();
//
// Families are created at startup and never removed; every pointer and reference the
// registry hands out stays valid until the Registry is destroyed. All methods are
// thread-safe.
#ifndef MULO_SERVER_METRICS_REGISTRY_H_
#define MULO_SERVER_METRICS_REGISTRY_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/collector.h"
#include "server/metrics/family.h"

namespace mulo::server::metrics {

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // `name` is the full sample name, given as Prometheus should show it: counters end in
  // "_total" and units are base units ("_seconds", "_bytes"), which promtool's linter
  // expects (the registry checks syntax, not these conventions).
  //
  // Errors: InvalidArgument for a malformed metric or label name, a duplicated label name,
  // or (histograms) a label named "le" or bucket bounds that are not strictly increasing;
  // AlreadyExists when any sample name of the new family (for a histogram also
  // name_bucket, name_sum, name_count) is already taken.
  absl::StatusOr<CounterFamily*> AddCounter(const std::string& name, const std::string& help,
                                            const std::vector<std::string>& label_names = {});
  absl::StatusOr<GaugeFamily*> AddGauge(const std::string& name, const std::string& help,
                                        const std::vector<std::string>& label_names = {});
  // `bucket_bounds`: finite, strictly increasing upper bounds; a trailing +Inf may be given
  // and is dropped (the +Inf bucket is always exported). An empty list is valid and gives
  // just the +Inf bucket.
  absl::StatusOr<HistogramFamily*> AddHistogram(const std::string& name,
                                                const std::string& help,
                                                const std::vector<std::string>& label_names,
                                                std::vector<double> bucket_bounds);

  // Adds a scrape-time collector. Errors as above for the names in Describe().
  absl::Status AddCollector(std::unique_ptr<Collector> collector);

  // Every registered and collected family, sorted by name; children sorted by label
  // values. Collectors run without the registry lock held.
  std::vector<FamilySnapshot> Collect() const;

 private:
  // Checks `name` and `label_names`, then reserves the sample names of the family.
  absl::Status Reserve(const std::string& name, MetricType type,
                       const std::vector<std::string>& label_names)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct CollectorEntry {
    std::unique_ptr<Collector> collector;
    std::set<std::string> names;  // From Describe().
  };

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<internal::FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  // unique_ptr: entries are read outside the lock while collecting, so their addresses
  // must survive a later AddCollector growing the vector.
  std::vector<std::unique_ptr<CollectorEntry>> collectors_ ABSL_GUARDED_BY(mu_);
  // Every sample name in use, so that e.g. a counter "x_count" cannot shadow the _count
  // series of a histogram "x".
  std::set<std::string> sample_names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_REGISTRY_H_
