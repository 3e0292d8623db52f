// A metric family: one name, help text and label schema, with one child metric per
// distinct tuple of label values.
#ifndef MULO_SERVER_METRICS_FAMILY_H_
#define MULO_SERVER_METRICS_FAMILY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/collector.h"
#include "server/metrics/metric.h"

namespace mulo::server::metrics {

namespace internal {

// Aborts with a message naming the family. A wrong number of label values is a
// programming error (label schemas are fixed in code), so it fails loudly on first use,
// which any test exercising the call site catches, rather than returning an error every
// call site would have to handle.
[[noreturn]] void DieOnLabelCount(const std::string& family, size_t expected,
                                  size_t actual);

// The type-independent part of a family; what the Registry stores and snapshots.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names, std::vector<double> bucket_bounds)
      : name_(std::move(name)),
        help_(std::move(help)),
        type_(type),
        label_names_(std::move(label_names)),
        bucket_bounds_(std::move(bucket_bounds)) {}
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Copies every child, ordered by label values.
  FamilySnapshot Snapshot() const;

 protected:
  virtual void AppendMetrics(std::vector<MetricSnapshot>* out) const = 0;

 private:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bucket_bounds_;
};

}  // namespace internal

template <typename MetricT>
class Family final : public internal::FamilyBase {
 public:
  // Created by the Registry, which has validated every argument.
  Family(std::string name, std::string help, MetricType type,
         std::vector<std::string> label_names, std::vector<double> bucket_bounds,
         std::function<std::unique_ptr<MetricT>()> make_metric)
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names),
                   std::move(bucket_bounds)),
        make_metric_(std::move(make_metric)) {
    // An unlabelled family has exactly one series; create it now so it is exported (as 0)
    // from the first scrape instead of appearing only after the first event.
    if (this->label_names().empty()) children_.emplace(LabelValues{}, make_metric_());
  }

  // The child for `label_values` (one value per label name, in order), created on first
  // use. The reference stays valid for the lifetime of the Registry; hot paths should keep
  // it instead of calling WithLabels per event. Aborts if the number of values is wrong
  // (see internal::DieOnLabelCount).
  MetricT& WithLabels(const std::vector<std::string>& label_values) {
    if (label_values.size() != label_names().size()) {
      internal::DieOnLabelCount(name(), label_names().size(), label_values.size());
    }
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = children_.find(label_values);
      if (it != children_.end()) return *it->second;
    }
    absl::MutexLock lock(&mu_);
    std::unique_ptr<MetricT>& child = children_[label_values];
    if (child == nullptr) child = make_metric_();  // Another thread may have won the race.
    return *child;
  }

 protected:
  void AppendMetrics(std::vector<MetricSnapshot>* out) const override {
    absl::ReaderMutexLock lock(&mu_);
    out->reserve(children_.size());
    for (const auto& [label_values, metric] : children_) {
      MetricSnapshot snapshot;
      snapshot.label_values = label_values;
      metric->CollectInto(&snapshot);
      out->push_back(std::move(snapshot));
    }
  }

 private:
  using LabelValues = std::vector<std::string>;

  const std::function<std::unique_ptr<MetricT>()> make_metric_;
  mutable absl::Mutex mu_;
  // std::map keeps children sorted by label values (deterministic exposition); the
  // unique_ptr keeps each child's address stable.
  std::map<LabelValues, std::unique_ptr<MetricT>> children_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_FAMILY_H_
