#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/metrics/exposition.h"

namespace mulo::server::metrics {
namespace {

// Scrapes and probes are few and short: a handful of workers is plenty, where civetweb's
// default of 50 threads would only cost memory.
constexpr char kNumThreads[] = "4";
// Bounds how long a slow or stuck client can hold a worker.
constexpr char kRequestTimeoutMs[] = "10000";
constexpr char kPlainText[] = "text/plain; charset=utf-8";

// civetweb's library state (mg_init_library / mg_exit_library) is process-wide, and
// mg_init_library is documented as not thread-safe. This reference count, with its mutex,
// is the one piece of global state here: the first running server initialises the
// library, the last one to stop releases it, and the mutex serialises both, so servers
// may be started and stopped from any thread. It is leaked on purpose so it outlives
// every server, whatever the order of static destruction.
struct CivetwebLibrary {
  absl::Mutex mu;
  int users ABSL_GUARDED_BY(mu) = 0;
};

CivetwebLibrary& Library() {
  static CivetwebLibrary* const library = new CivetwebLibrary;
  return *library;
}

void AcquireLibrary() {
  CivetwebLibrary& library = Library();
  absl::MutexLock lock(&library.mu);
  // With features = 0 the return value (the features initialised) is 0 on success too, so
  // it cannot signal failure; the only failure modes are pthread mutex/key creation.
  if (library.users++ == 0) mg_init_library(0);
}

void ReleaseLibrary() {
  CivetwebLibrary& library = Library();
  absl::MutexLock lock(&library.mu);
  if (--library.users == 0) mg_exit_library();
}

// Parses "PORT" or "IPV4:PORT" with PORT in 0..65535 into the IPv4 address to wake the
// listener with (see Stop). civetweb's own syntax also allows lists and "s"/"r" suffixes
// (TLS, redirect), which this endpoint does not use; rejecting them keeps port() meaningful.
absl::StatusOr<in_addr> ParseAddress(absl::string_view address) {
  const auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics HTTP address \"", address, "\": expected PORT or IPV4:PORT with PORT in "
        "0..65535, e.g. 0.0.0.0:9090"));
  };
  const size_t colon = address.rfind(':');
  const absl::string_view port =
      colon == absl::string_view::npos ? address : address.substr(colon + 1);
  int value = 0;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(port, &value) || value > 65535) {
    return invalid();
  }
  in_addr ip{htonl(INADDR_LOOPBACK)};
  if (colon != absl::string_view::npos) {
    const std::string host(address.substr(0, colon));
    if (inet_pton(AF_INET, host.c_str(), &ip) != 1) return invalid();
    // A wildcard listener is reachable on loopback.
    if (ip.s_addr == htonl(INADDR_ANY)) ip.s_addr = htonl(INADDR_LOOPBACK);
  }
  return ip;
}

// Opens and closes a TCP connection to ip:port, ignoring the outcome.
void Poke(in_addr ip, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  target.sin_addr = ip;
  connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof(target));
  close(fd);
}

void SendResponse(mg_connection* conn, int status, const char* content_type,
                  const std::string& body, bool head_only) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", content_type, -1);
  const std::string length = std::to_string(body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  // Probes and scrapes must see the current state, never a cached one.
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  if (status == 405) mg_response_header_add(conn, "Allow", "GET, HEAD", -1);
  mg_response_header_send(conn);
  if (!head_only) mg_write(conn, body.data(), body.size());
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(const Registry* registry, ReadinessCheck is_ready)
    : registry_(registry), is_ready_(std::move(is_ready)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(absl::string_view address) {
  if (context_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics HTTP server already listening on port ", port_));
  }
  absl::StatusOr<in_addr> ip = ParseAddress(address);
  if (!ip.ok()) return ip.status();

  const std::string ports(address);
  const char* options[] = {
      "listening_ports", ports.c_str(),
      "num_threads", kNumThreads,
      "request_timeout_ms", kRequestTimeoutMs,
      // One worker per connection: keep-alive would let an idle scraper pin a worker.
      "enable_keep_alive", "no",
      nullptr,
  };
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = &MetricsHttpServer::LogMessage;
  mg_init_data init = {&callbacks, this, options};
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error = {&error_code, error_text, sizeof(error_text)};

  {
    absl::MutexLock lock(&log_mu_);
    starting_ = true;
    start_log_.clear();
  }
  AcquireLibrary();
  context_ = mg_start2(&init, &error);
  std::vector<std::string> log;
  {
    absl::MutexLock lock(&log_mu_);
    starting_ = false;
    log.swap(start_log_);
  }
  if (context_ == nullptr) {
    ReleaseLibrary();
    if (log.empty() && error_text[0] != '\0') log.push_back(error_text);
    return absl::UnavailableError(absl::StrCat("metrics HTTP server cannot listen on ",
                                               address, ": ", absl::StrJoin(log, "; ")));
  }

  mg_server_port bound;
  if (mg_get_server_ports(context_, 1, &bound) != 1) {
    Stop();
    return absl::InternalError(
        absl::StrCat("metrics HTTP server on ", address, ": no listening port reported"));
  }
  port_ = bound.port;
  wake_ip_ = ip->s_addr;
  // "/" matches every path; Handle dispatches on the exact path so "/metrics/x" is a 404
  // rather than a prefix match. The handler needs the context, so it is set after
  // mg_start2: a request racing with Start gets civetweb's own 404 (no document root).
  mg_set_request_handler(context_, "/", &MetricsHttpServer::HandleRequest, this);
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (context_ == nullptr) return;
  // civetweb 1.15's master thread sees the stop flag only when its poll() on the listening
  // socket returns, which without traffic takes up to SOCKET_TIMEOUT_QUANTUM (2 s). Connecting
  // to ourselves while mg_stop waits wakes it at once, so Stop takes milliseconds. A poke
  // that lands before the flag is set is served as an empty connection and closed; if
  // pokes cannot connect (filtered loopback), Stop just takes the 2 s.
  std::atomic<bool> stopped{false};
  std::thread waker([&stopped, ip = in_addr{wake_ip_}, port = port_] {
    while (!stopped.load()) {
      Poke(ip, port);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  mg_stop(context_);  // Joins every worker, so no handler still uses `this` afterwards.
  stopped = true;
  waker.join();
  context_ = nullptr;
  port_ = 0;
  ReleaseLibrary();
}

int MetricsHttpServer::HandleRequest(mg_connection* conn, void* self) {
  return static_cast<MetricsHttpServer*>(self)->Handle(conn);
}

int MetricsHttpServer::Handle(mg_connection* conn) {
  const mg_request_info* request = mg_get_request_info(conn);
  const absl::string_view method = request->request_method;
  const absl::string_view path = request->local_uri != nullptr ? request->local_uri : "";
  const bool head_only = method == "HEAD";
  if (method != "GET" && !head_only) {
    SendResponse(conn, 405, kPlainText, "method not allowed\n", false);
    return 405;
  }
  if (path == "/metrics") {
    SendResponse(conn, 200, kTextContentType, SerializeText(*registry_), head_only);
    return 200;
  }
  if (path == "/healthz") {
    // Answering at all is the liveness signal.
    SendResponse(conn, 200, kPlainText, "ok\n", head_only);
    return 200;
  }
  if (path == "/readyz") {
    const bool ready = !is_ready_ || is_ready_();
    const int status = ready ? 200 : 503;
    SendResponse(conn, status, kPlainText, ready ? "ready\n" : "not ready\n", head_only);
    return status;
  }
  SendResponse(conn, 404, kPlainText, "not found\n", head_only);
  return 404;
}

int MetricsHttpServer::LogMessage(const mg_connection* conn, const char* message) {
  // During mg_start2 civetweb passes a stand-in connection whose context already carries
  // our user data.
  auto* self = conn == nullptr ? nullptr
                               : static_cast<MetricsHttpServer*>(
                                     mg_get_user_data(mg_get_context(conn)));
  if (self != nullptr) {
    absl::MutexLock lock(&self->log_mu_);
    if (self->starting_) {
      self->start_log_.emplace_back(message);
      return 1;
    }
  }
  std::fprintf(stderr, "metrics http: %s\n", message);
  return 1;  // Handled: civetweb writes nothing itself.
}

}  // namespace mulo::server::metrics
