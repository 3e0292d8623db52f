#include "server/metrics/family.h"

#include <cstdio>
#include <cstdlib>

namespace mulo::server::metrics::internal {

void DieOnLabelCount(const std::string& family, size_t expected, size_t actual) {
  std::fprintf(stderr,
               "FATAL: metric family %s: WithLabels got %zu label values, the family has "
               "%zu label names\n",
               family.c_str(), actual, expected);
  std::abort();
}

FamilySnapshot FamilyBase::Snapshot() const {
  FamilySnapshot snapshot;
  snapshot.name = name_;
  snapshot.help = help_;
  snapshot.type = type_;
  snapshot.label_names = label_names_;
  snapshot.bucket_bounds = bucket_bounds_;
  AppendMetrics(&snapshot.metrics);
  return snapshot;
}

}  // namespace mulo::server::metrics::internal
