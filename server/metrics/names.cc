#include "server/metrics/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace mulo::server::metrics {
namespace {

// The rules are ASCII-only on purpose: absl::ascii_isalpha rejects the locale-dependent
// letters std::isalpha might accept.
bool IsNameChar(char c, bool allow_colon) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         (allow_colon && c == ':');
}

bool IsValidName(absl::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  if (absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!IsNameChar(c, allow_colon)) return false;
  }
  return true;
}

}  // namespace

bool IsValidMetricName(absl::string_view name) {
  return IsValidName(name, /*allow_colon=*/true);
}

bool IsValidLabelName(absl::string_view name) {
  return IsValidName(name, /*allow_colon=*/false) && !absl::StartsWith(name, "__");
}

}  // namespace mulo::server::metrics
