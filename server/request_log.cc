#include "server/request_log.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/client_text.h"

namespace mulo::server {

std::string FormatRequestLog(const RequestLogLine& l) {
  std::string out = absl::StrFormat(
      "request id=%s model=%s method=%s status=%s tokens=%d queue=%.3fs", Printable(l.request_id),
      l.model.empty() ? "-" : Printable(l.model), l.method.empty() ? "-" : l.method,
      absl::StatusCodeToString(l.status.code()), l.tokens, l.queue_seconds);
  if (l.first_row_seconds >= 0) absl::StrAppendFormat(&out, " first_row=%.3fs", l.first_row_seconds);
  absl::StrAppendFormat(&out, " total=%.3fs forwards=%d step_compression=%.2f", l.total_seconds,
                        l.stats.target_forward_passes, l.stats.StepCompression());
  absl::StrAppend(&out, " protocol=", l.protocol);
  if (!l.user.empty()) absl::StrAppend(&out, " user=", Printable(l.user));
  if (!l.status.ok()) absl::StrAppend(&out, " error=\"", l.status.message(), "\"");
  return out;
}

void WriteRequestLog(const RequestLogLine& line) {
  const std::string text = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ ", absl::Now(), absl::UTCTimeZone()),
      FormatRequestLog(line), "\n");
  std::fputs(text.c_str(), stderr);  // one fputs per line keeps lines whole across threads
}

}  // namespace mulo::server
