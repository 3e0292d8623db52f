// A minimal blocking HTTP/1.0 client over POSIX sockets, for talking to the metrics
// endpoint on loopback in tests without adding a dependency.
#ifndef MULO_TESTS_SERVER_METRICS_HTTP_CLIENT_H_
#define MULO_TESTS_SERVER_METRICS_HTTP_CLIENT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mulo::server::metrics::testing {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // Names lower-cased.
  std::string body;
};

// A socket connected to 127.0.0.1:port, with `timeout_seconds` (when > 0) on every later send
// and receive; -1 with errno set when it cannot connect. The caller closes it.
int ConnectLoopback(int port, long timeout_seconds = 0);

struct HttpOptions {
  std::string body;                  // sent with Content-Type: application/json
  std::vector<std::string> headers;  // extra "Name: value" lines
  bool http10 = false;               // HTTP/1.0: an unknown-length body comes unchunked
  long timeout_seconds = 5;          // every socket operation
};

// Sends `method path` to 127.0.0.1:port with "Connection: close" and reads the response
// until the server closes the connection (5 s timeout on every socket operation).
absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method,
                                         const std::string& path);

absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method,
                                         const std::string& path, const HttpOptions& options);

inline absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path) {
  return HttpRequest(port, "GET", path);
}

}  // namespace mulo::server::metrics::testing

#endif  // MULO_TESTS_SERVER_METRICS_HTTP_CLIENT_H_
