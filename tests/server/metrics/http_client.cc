#include "tests/server/metrics/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace mulo::server::metrics::testing {
namespace {

// Closes the socket on every return path.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  const int fd_;
};

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::StatusOr<HttpResponse> Parse(const std::string& raw) {
  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("no end of headers in: ", raw));
  }
  HttpResponse response;
  response.body = raw.substr(header_end + 4);
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(raw).substr(0, header_end), "\r\n");
  // Status line: "HTTP/1.1 200 OK".
  std::vector<absl::string_view> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/") ||
      !absl::SimpleAtoi(status_line[1], &response.status)) {
    return absl::DataLossError(absl::StrCat("bad status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    response.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  return response;
}

}  // namespace

int ConnectLoopback(int port, long timeout_seconds) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (timeout_seconds > 0) {
    timeval timeout{timeout_seconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    close(fd);
    errno = error;  // for the caller's message
    return -1;
  }
  return fd;
}

absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method,
                                         const std::string& path) {
  return HttpRequest(port, method, path, HttpOptions());
}

absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method,
                                         const std::string& path, const HttpOptions& options) {
  Socket socket(ConnectLoopback(port, options.timeout_seconds));
  if (socket.fd() < 0) return Errno(absl::StrCat("connect to 127.0.0.1:", port));
  std::string request = absl::StrCat(method, " ", path,
                                     options.http10 ? " HTTP/1.0" : " HTTP/1.1",
                                     "\r\nHost: 127.0.0.1:", port, "\r\nConnection: close\r\n");
  for (const auto& header : options.headers) absl::StrAppend(&request, header, "\r\n");
  if (!options.body.empty() || method == "POST") {
    absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ",
                    options.body.size(), "\r\n");
  }
  absl::StrAppend(&request, "\r\n", options.body);
  // A server may answer before the body is all sent (413 from Content-Length) and close: a
  // failed send still reads what was answered, as curl does.
  absl::Status sending = absl::OkStatus();
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n =
        send(socket.fd(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      sending = Errno("send");
      break;
    }
    sent += n;
  }
  std::string raw;
  char buffer[4096];
  for (;;) {
    const ssize_t n = recv(socket.fd(), buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      // A reset after an early answer still leaves that answer; otherwise this is the error.
      if (!raw.empty()) break;
      return sending.ok() ? Errno("recv") : sending;
    }
    raw.append(buffer, n);
  }
  if (raw.empty() && !sending.ok()) return sending;
  return Parse(raw);
}

}  // namespace mulo::server::metrics::testing
