// HTTP endpoint for Prometheus scrapes and Kubernetes probes, on civetweb (C API):
//   GET /metrics  200, Content-Type kTextContentType, body = SerializeText(registry)
//   GET /healthz  200 "ok\n" while the process is alive (liveness)
//   GET /readyz   200 "ready\n" or 503 "not ready\n" from the readiness check (readiness)
//   other paths   404; methods other than GET / HEAD get 405.
// It runs on its own port, separate from gRPC, so probes and scrapes keep working when the
// gRPC server is saturated or draining.
#ifndef MULO_SERVER_METRICS_HTTP_SERVER_H_
#define MULO_SERVER_METRICS_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/registry.h"

struct mg_connection;
struct mg_context;

namespace mulo::server::metrics {

// Start, Stop and port() are meant for the owning thread (not for concurrent calls on one
// object); requests are served on civetweb's worker threads. Note that civetweb sets
// SIGPIPE to SIG_IGN process-wide when a server starts (so a client hanging up cannot
// kill the process); gRPC servers want the same.
class MetricsHttpServer {
 public:
  // Called on civetweb worker threads, possibly concurrently: must be thread-safe and
  // cheap (a probe waits for it). Typically "models loaded and not draining".
  using ReadinessCheck = std::function<bool()>;

  // `registry` must outlive the server. An empty `is_ready` means always ready.
  MetricsHttpServer(const Registry* registry, ReadinessCheck is_ready);
  // Stops the server (waits for in-flight requests).
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Listens on `address`: "PORT" (all IPv4 interfaces) or "IPV4:PORT" with a literal
  // address, e.g. "0.0.0.0:9090"; port 0 picks a free port (see port()). Host names and
  // IPv6 are not accepted (Debian's civetweb is built without IPv6). Errors:
  // InvalidArgument for a malformed address, FailedPrecondition if already started,
  // Unavailable when civetweb cannot listen (the message carries its reason, e.g.
  // "cannot bind to 127.0.0.1:9090: 98 (Address already in use)").
  absl::Status Start(absl::string_view address);

  // Stops serving; idempotent. Start may be called again afterwards.
  void Stop();

  // The bound port while running (the real one when started with port 0), else 0.
  int port() const { return port_; }

 private:
  static int HandleRequest(mg_connection* conn, void* self);
  static int LogMessage(const mg_connection* conn, const char* message);
  int Handle(mg_connection* conn);

  const Registry* const registry_;
  const ReadinessCheck is_ready_;
  mg_context* context_ = nullptr;
  int port_ = 0;
  uint32_t wake_ip_ = 0;  // Network byte order: where Stop connects to wake civetweb.

  // civetweb reports why it failed to start only through the log callback; Start collects
  // those messages for its Status. Outside Start they go to stderr.
  absl::Mutex log_mu_;
  bool starting_ ABSL_GUARDED_BY(log_mu_) = false;
  std::vector<std::string> start_log_ ABSL_GUARDED_BY(log_mu_);
};

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_HTTP_SERVER_H_
