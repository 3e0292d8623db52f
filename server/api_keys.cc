#include "server/api_keys.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/text_file.h"

namespace mulo::server {
namespace {

absl::StatusOr<std::vector<std::string>> ReadKeys(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("--api_keys_file: cannot read ", path));
  std::vector<std::string> keys;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    keys.emplace_back(line);
  }
  return keys;
}

}  // namespace

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of the longer one is visited whatever the contents: no early exit.
  const size_t n = std::max(a.size(), b.size());
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= x ^ y;
  }
  return difference == 0;
}

absl::StatusOr<std::unique_ptr<ApiKeys>> ApiKeys::Load(const std::string& path) {
  auto keys = std::make_unique<ApiKeys>();
  keys->path_ = path;
  auto loaded = keys->Reload();
  if (!loaded.ok()) return loaded.status();
  // At start an empty file is a mistake to report, not a server that refuses every call.
  if (*loaded == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--api_keys_file: ", path, " holds no key"));
  }
  return keys;
}

absl::StatusOr<int> ApiKeys::Reload() {
  if (path_.empty()) return 0;
  auto keys = ReadKeys(path_);
  if (!keys.ok()) return keys.status();
  absl::MutexLock lock(&mu_);
  keys_ = *std::move(keys);
  return static_cast<int>(keys_.size());
}

absl::Status ApiKeys::Authorize(absl::string_view authorization) const {
  if (!enabled()) return absl::OkStatus();
  // "Bearer" is an authentication scheme, matched case-insensitively (RFC 9110, 11.1), then
  // one or more spaces.
  absl::string_view presented = absl::StripLeadingAsciiWhitespace(authorization);
  const size_t space = presented.find(' ');
  const bool bearer =
      space != absl::string_view::npos && absl::EqualsIgnoreCase(presented.substr(0, space), "Bearer");
  if (bearer) presented = absl::StripAsciiWhitespace(presented.substr(space + 1));
  bool known = false;
  {
    absl::MutexLock lock(&mu_);
    // Every key is compared, so the time does not tell which one matched.
    for (const std::string& key : keys_) known |= ConstantTimeEquals(presented, key);
  }
  if (bearer && known) return absl::OkStatus();
  return absl::UnauthenticatedError(
      authorization.empty()
          ? "authorization: no API key; send the header \"Authorization: Bearer <key>\""
          : "authorization: unknown API key (or not \"Bearer <key>\")");
}

}  // namespace mulo::server
