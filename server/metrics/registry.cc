#include "server/metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/metrics/names.h"

namespace mulo::server::metrics {
namespace {

std::vector<std::string> SampleNames(const std::string& name, MetricType type) {
  if (type != MetricType::kHistogram) return {name};
  return {name, name + "_bucket", name + "_sum", name + "_count"};
}

// Drops a trailing +Inf and checks the rest is finite and strictly increasing.
absl::Status NormalizeBuckets(const std::string& name, std::vector<double>* bounds) {
  if (!bounds->empty() && bounds->back() == INFINITY) bounds->pop_back();
  for (size_t i = 0; i < bounds->size(); ++i) {
    const double bound = (*bounds)[i];
    if (!std::isfinite(bound)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, ": bucket bound ", bound, " is not finite (only a trailing "
          "+Inf is allowed)"));
    }
    if (i > 0 && !((*bounds)[i - 1] < bound)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, ": bucket bounds must be strictly increasing, got ",
          (*bounds)[i - 1], " then ", bound));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Registry::Reserve(const std::string& name, MetricType type,
                               const std::vector<std::string>& label_names) {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid metric name \"", name, "\": must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  std::set<std::string> seen;
  for (const std::string& label : label_names) {
    if (!IsValidLabelName(label)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric ", name, ": invalid label name \"", label,
          "\": must match [a-zA-Z_][a-zA-Z0-9_]* and not start with __"));
    }
    if (type == MetricType::kHistogram && label == "le") {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", name, ": label name \"le\" is reserved for buckets"));
    }
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name, ": duplicate label name \"", label, "\""));
    }
  }
  const std::vector<std::string> samples = SampleNames(name, type);
  for (const std::string& sample : samples) {
    if (sample_names_.count(sample) > 0) {
      return absl::AlreadyExistsError(absl::StrCat(
          "metric ", name, ": sample name ", sample, " is already registered"));
    }
  }
  sample_names_.insert(samples.begin(), samples.end());
  return absl::OkStatus();
}

absl::StatusOr<CounterFamily*> Registry::AddCounter(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reserve(name, MetricType::kCounter, label_names); !s.ok()) return s;
  auto family = std::make_unique<CounterFamily>(
      name, help, MetricType::kCounter, label_names, std::vector<double>{},
      [] { return std::make_unique<Counter>(); });
  CounterFamily* result = family.get();
  families_.emplace(name, std::move(family));
  return result;
}

absl::StatusOr<GaugeFamily*> Registry::AddGauge(const std::string& name,
                                                const std::string& help,
                                                const std::vector<std::string>& label_names) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reserve(name, MetricType::kGauge, label_names); !s.ok()) return s;
  auto family = std::make_unique<GaugeFamily>(
      name, help, MetricType::kGauge, label_names, std::vector<double>{},
      [] { return std::make_unique<Gauge>(); });
  GaugeFamily* result = family.get();
  families_.emplace(name, std::move(family));
  return result;
}

absl::StatusOr<HistogramFamily*> Registry::AddHistogram(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names, std::vector<double> bucket_bounds) {
  if (absl::Status s = NormalizeBuckets(name, &bucket_bounds); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reserve(name, MetricType::kHistogram, label_names); !s.ok()) {
    return s;
  }
  auto family = std::make_unique<HistogramFamily>(
      name, help, MetricType::kHistogram, label_names, bucket_bounds,
      [bucket_bounds] { return std::make_unique<Histogram>(bucket_bounds); });
  HistogramFamily* result = family.get();
  families_.emplace(name, std::move(family));
  return result;
}

absl::Status Registry::AddCollector(std::unique_ptr<Collector> collector) {
  if (collector == nullptr) return absl::InvalidArgumentError("null collector");
  auto entry = std::make_unique<CollectorEntry>();
  for (const std::string& name : collector->Describe()) entry->names.insert(name);
  absl::MutexLock lock(&mu_);
  // The collector's types are unknown until it runs, so reserve every name a histogram
  // would use; check them all before reserving any so a failure leaves nothing behind.
  std::set<std::string> samples;
  for (const std::string& name : entry->names) {
    if (!IsValidMetricName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("collector: invalid metric name \"", name, "\""));
    }
    for (std::string& sample : SampleNames(name, MetricType::kHistogram)) {
      if (sample_names_.count(sample) > 0) {
        return absl::AlreadyExistsError(absl::StrCat(
            "collector metric ", name, ": sample name ", sample, " is already registered"));
      }
      samples.insert(std::move(sample));
    }
  }
  sample_names_.insert(samples.begin(), samples.end());
  entry->collector = std::move(collector);
  collectors_.push_back(std::move(entry));
  return absl::OkStatus();
}

std::vector<FamilySnapshot> Registry::Collect() const {
  std::vector<FamilySnapshot> result;
  std::vector<const CollectorEntry*> collectors;
  {
    absl::ReaderMutexLock lock(&mu_);
    result.reserve(families_.size());
    for (const auto& [name, family] : families_) result.push_back(family->Snapshot());
    for (const auto& entry : collectors_) collectors.push_back(entry.get());
  }
  for (const CollectorEntry* entry : collectors) {
    for (FamilySnapshot& family : entry->collector->Collect()) {
      // Undescribed names could duplicate another family and break the whole scrape.
      if (entry->names.count(family.name) == 0) continue;
      // Same for malformed children: label values not matching the label names, or
      // histogram counts not matching the buckets.
      auto& metrics = family.metrics;
      const bool histogram = family.type == MetricType::kHistogram;
      metrics.erase(
          std::remove_if(metrics.begin(), metrics.end(),
                         [&](const MetricSnapshot& m) {
                           return m.label_values.size() != family.label_names.size() ||
                                  (histogram && m.cumulative_counts.size() !=
                                                    family.bucket_bounds.size());
                         }),
          metrics.end());
      std::sort(metrics.begin(), metrics.end(),
                [](const MetricSnapshot& a, const MetricSnapshot& b) {
                  return a.label_values < b.label_values;
                });
      result.push_back(std::move(family));
    }
  }
  std::stable_sort(result.begin(), result.end(),
                   [](const FamilySnapshot& a, const FamilySnapshot& b) {
                     return a.name < b.name;
                   });
  return result;
}

}  // namespace mulo::server::metrics
