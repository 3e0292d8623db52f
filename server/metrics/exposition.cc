#include "server/metrics/exposition.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mulo::server::metrics {
namespace {

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Appends `{a="x",b="y"}` (with `extra` as a last pair if given), or nothing if there are
// no labels at all.
void AppendLabels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                  absl::string_view extra_name, absl::string_view extra_value,
                  std::string* out) {
  if (names.empty() && extra_name.empty()) return;
  out->push_back('{');
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out->push_back(',');
    absl::StrAppend(out, names[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out->push_back(',');
    absl::StrAppend(out, extra_name, "=\"", extra_value, "\"");
  }
  out->push_back('}');
}

void AppendSample(absl::string_view name, const std::vector<std::string>& label_names,
                  const MetricSnapshot& metric, absl::string_view extra_name,
                  absl::string_view extra_value, absl::string_view value, std::string* out) {
  out->append(name.data(), name.size());
  AppendLabels(label_names, metric.label_values, extra_name, extra_value, out);
  absl::StrAppend(out, " ", value, "\n");
}

void AppendFamily(const FamilySnapshot& family, std::string* out) {
  absl::StrAppend(out, "# HELP ", family.name, " ", EscapeHelp(family.help), "\n");
  absl::StrAppend(out, "# TYPE ", family.name, " ", TypeName(family.type), "\n");
  const std::vector<std::string>& labels = family.label_names;
  for (const MetricSnapshot& metric : family.metrics) {
    if (family.type != MetricType::kHistogram) {
      AppendSample(family.name, labels, metric, "", "", FormatValue(metric.value), out);
      continue;
    }
    const std::string bucket = family.name + "_bucket";
    for (size_t i = 0; i < family.bucket_bounds.size(); ++i) {
      AppendSample(bucket, labels, metric, "le", FormatValue(family.bucket_bounds[i]),
                   absl::StrCat(metric.cumulative_counts[i]), out);
    }
    const std::string count = absl::StrCat(metric.count);
    AppendSample(bucket, labels, metric, "le", "+Inf", count, out);
    AppendSample(family.name + "_sum", labels, metric, "", "", FormatValue(metric.sum), out);
    AppendSample(family.name + "_count", labels, metric, "", "", count, out);
  }
}

}  // namespace

namespace {

// Backslash and newline are escaped in both help text and label values; a double quote only
// in label values (the text format's rule).
std::string Escape(absl::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) { return Escape(value, /*quote=*/true); }

std::string EscapeHelp(absl::string_view help) { return Escape(help, /*quote=*/false); }

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Without a format argument std::to_chars writes the shortest representation that
  // round-trips, choosing fixed or scientific notation, whichever is shorter. Unlike
  // printf("%g") it loses no precision and does not depend on the locale.
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string FormatText(std::vector<FamilySnapshot> families) {
  std::stable_sort(families.begin(), families.end(),
                   [](const FamilySnapshot& a, const FamilySnapshot& b) {
                     return a.name < b.name;
                   });
  std::string out;
  for (const FamilySnapshot& family : families) {
    // Like the Go client, skip families without series (a labelled family before its first
    // WithLabels): HELP/TYPE lines alone carry no data.
    if (family.metrics.empty()) continue;
    AppendFamily(family, &out);
  }
  return out;
}

std::string SerializeText(const Registry& registry) {
  return FormatText(registry.Collect());
}

}  // namespace mulo::server::metrics
