// Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): "# HELP" and "# TYPE"
// lines, then one line per sample, without timestamps. Output is deterministic: families
// sorted by name, children by label values, labels in the family's declared order with a
// histogram's "le" last.
#ifndef MULO_SERVER_METRICS_EXPOSITION_H_
#define MULO_SERVER_METRICS_EXPOSITION_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/metrics/collector.h"
#include "server/metrics/registry.h"

namespace mulo::server::metrics {

// The Content-Type of a scrape response in this format.
inline constexpr char kTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// Collects `registry` and formats the result.
std::string SerializeText(const Registry& registry);

// Formats snapshots (sorted by name first; children are written in the given order).
std::string FormatText(std::vector<FamilySnapshot> families);

// Label values: backslash, double quote and newline are escaped.
std::string EscapeLabelValue(absl::string_view value);
// Help text: backslash and newline are escaped (a quote needs no escape there).
std::string EscapeHelp(absl::string_view help);
// Shortest text that parses back to exactly `value` ("0.25", "1e-05", "80000"), with
// Prometheus' spellings "+Inf", "-Inf" and "NaN".
std::string FormatValue(double value);

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_EXPOSITION_H_
