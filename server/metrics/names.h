// Prometheus naming rules, checked when a metric family is registered so that a bad name
// fails at startup instead of producing an exposition Prometheus rejects at scrape time.
#ifndef MULO_SERVER_METRICS_NAMES_H_
#define MULO_SERVER_METRICS_NAMES_H_

#include "absl/strings/string_view.h"

namespace mulo::server::metrics {

// [a-zA-Z_:][a-zA-Z0-9_:]* (colons are legal, though by convention only recording rules
// use them).
bool IsValidMetricName(absl::string_view name);

// [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__" (reserved for Prometheus internals).
// Unlike metric names, label names may not contain colons.
bool IsValidLabelName(absl::string_view name);

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_NAMES_H_
