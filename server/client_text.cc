#include "server/client_text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace mulo::server {

std::string Quoted(absl::string_view text) {
  if (text.size() <= kMaxQuotedBytes) return absl::StrCat("'", absl::CHexEscape(text), "'");
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, kMaxQuotedBytes)), "...' (",
                      text.size(), " bytes)");
}

std::string Printable(absl::string_view text) {
  // Spaces would split the key=value field.
  std::string escaped = absl::CHexEscape(text.substr(0, kMaxQuotedBytes));
  for (size_t at = escaped.find(' '); at != std::string::npos; at = escaped.find(' ', at)) {
    escaped.replace(at, 1, "\\x20");
  }
  if (text.size() <= kMaxQuotedBytes) return escaped;
  return absl::StrCat(escaped, "...(", text.size(), "_bytes)");
}

}  // namespace mulo::server
