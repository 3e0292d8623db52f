// Text a client chose (model names, request ids) on its way into an error message, a log line
// or a metric label. Clients may send megabytes, NUL bytes and newlines in a string field:
// echoed as is they would split log lines, blow the 8 KiB limit on gRPC trailers (the client
// then sees RESOURCE_EXHAUSTED instead of the real error) and grow /metrics without bound.
#ifndef MULO_SERVER_CLIENT_TEXT_H_
#define MULO_SERVER_CLIENT_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace mulo::server {

// Most bytes of client text an error message or log line quotes.
inline constexpr size_t kMaxQuotedBytes = 64;

// `text` in single quotes, C-escaped (so control bytes and quotes cannot break the line), cut
// to its first kMaxQuotedBytes bytes with its full length noted when longer:
// 'tiny', 'a\x00b', 'xxxx...' (100000 bytes).
std::string Quoted(absl::string_view text);

// The same without the quotes, for key=value log fields: req-7, a\x00b, xxxx...(100000 bytes).
std::string Printable(absl::string_view text);

}  // namespace mulo::server

#endif  // MULO_SERVER_CLIENT_TEXT_H_
