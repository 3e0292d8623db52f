#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/listen_address.h"
#include "server/metrics/exposition.h"

namespace mulo::server::metrics {
namespace {

constexpr char kPlainText[] = "text/plain; charset=utf-8";

bool SendResponse(MHD_Connection* connection, unsigned status, const char* content_type,
                  const std::string& body) {
  // MHD copies the body and leaves it out for HEAD requests itself (keeping Content-Length).
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return false;
  MHD_add_response_header(response, "Content-Type", content_type);
  // Probes and scrapes must see the current state, never a cached one.
  MHD_add_response_header(response, "Cache-Control", "no-store");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(response, "Allow", "GET, HEAD");
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued == MHD_YES;
}

}  // namespace

// The C callbacks, friends of MetricsHttpServer.
class HttpCallbacks {
 public:
  static MHD_Result Request(void* self, MHD_Connection* connection, const char* url,
                            const char* method, const char* /*version*/,
                            const char* /*upload_data*/, size_t* upload_data_size,
                            void** /*request_state*/) {
    // Answered on the first call, before any body: nothing here reads one, and MHD discards
    // what a client still sends.
    *upload_data_size = 0;
    return static_cast<MetricsHttpServer*>(self)->Handle(connection, url, method) ? MHD_YES
                                                                                   : MHD_NO;
  }

  static void Log(void* self, const char* format, va_list args) {
    char text[512];
    std::vsnprintf(text, sizeof(text), format, args);
    std::string message(text);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    static_cast<MetricsHttpServer*>(self)->Log(std::move(message));
  }
};

MetricsHttpServer::MetricsHttpServer(const Registry* registry, ReadinessCheck is_ready)
    : registry_(registry), is_ready_(std::move(is_ready)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(absl::string_view address) {
  if (daemon_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics HTTP server already listening on port ", port_));
  }
  absl::StatusOr<sockaddr_in> socket_address = ParseListenAddress(address, "metrics HTTP address");
  if (!socket_address.ok()) return socket_address.status();
  {
    absl::MutexLock lock(&log_mu_);
    starting_ = true;
    start_log_.clear();
  }
  // One internal epoll thread: every connection is a non-blocking socket on it, so no
  // number of idle connections can keep a probe waiting.
  daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr,
      &HttpCallbacks::Request, this,
      MHD_OPTION_SOCK_ADDR, &*socket_address,
      MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutSeconds,
      MHD_OPTION_EXTERNAL_LOGGER, &HttpCallbacks::Log, this,
      MHD_OPTION_END);
  std::vector<std::string> log;
  {
    absl::MutexLock lock(&log_mu_);
    starting_ = false;
    log.swap(start_log_);
  }
  if (daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("metrics HTTP server cannot listen on ", address,
                                               ": ", absl::StrJoin(log, "; ")));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  if (info == nullptr || info->port == 0) {
    Stop();
    return absl::InternalError(
        absl::StrCat("metrics HTTP server on ", address, ": no listening port reported"));
  }
  port_ = info->port;
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (daemon_ == nullptr) return;
  MHD_stop_daemon(daemon_);  // Joins its thread, so no callback still uses `this` afterwards.
  daemon_ = nullptr;
  port_ = 0;
}

bool MetricsHttpServer::Handle(MHD_Connection* connection, absl::string_view path,
                               absl::string_view method) {
  if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
    return SendResponse(connection, MHD_HTTP_METHOD_NOT_ALLOWED, kPlainText,
                        "method not allowed\n");
  }
  if (path == "/metrics") {
    return SendResponse(connection, MHD_HTTP_OK, kTextContentType, SerializeText(*registry_));
  }
  if (path == "/healthz") {
    // Answering at all is the liveness signal.
    return SendResponse(connection, MHD_HTTP_OK, kPlainText, "ok\n");
  }
  if (path == "/readyz") {
    const bool ready = !is_ready_ || is_ready_();
    return SendResponse(connection, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                        kPlainText, ready ? "ready\n" : "not ready\n");
  }
  return SendResponse(connection, MHD_HTTP_NOT_FOUND, kPlainText, "not found\n");
}

void MetricsHttpServer::Log(std::string message) {
  {
    absl::MutexLock lock(&log_mu_);
    if (starting_) {
      start_log_.push_back(std::move(message));
      return;
    }
  }
  std::fprintf(stderr, "metrics http: %s\n", message.c_str());
}

}  // namespace mulo::server::metrics
