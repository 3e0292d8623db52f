// HTTP endpoint for Prometheus scrapes and Kubernetes probes, on GNU libmicrohttpd:
//   GET /metrics  200, Content-Type kTextContentType, body = SerializeText(registry)
//   GET /healthz  200 "ok\n" while the process is alive (liveness)
//   GET /readyz   200 "ready\n" or 503 "not ready\n" from the readiness check (readiness)
//   other paths   404; methods other than GET / HEAD get 405.
// It runs on its own port, separate from gRPC, so probes and scrapes keep working when the
// gRPC server is saturated or draining. One epoll thread serves every connection without
// blocking, so idle or slow clients (a load balancer's pre-opened connections, a stuck
// scraper) cost a socket each and never a worker: probes keep answering however many are
// open. A connection idle for kIdleTimeoutSeconds is closed.
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

struct MHD_Connection;
struct MHD_Daemon;

namespace mulo::server::metrics {

// Seconds a connection may stay idle before the server closes it.
inline constexpr unsigned kIdleTimeoutSeconds = 10;

// Start, Stop and port() are meant for the owning thread (not for concurrent calls on one
// object); requests are served on the server's own thread. Writes use MSG_NOSIGNAL, so a
// client hanging up mid-response cannot raise SIGPIPE.
class MetricsHttpServer {
 public:
  // Called on the server's thread: must be thread-safe and cheap (every probe and scrape
  // waits for it). Typically "models loaded and not draining".
  using ReadinessCheck = std::function<bool()>;

  // `registry` must outlive the server. An empty `is_ready` means always ready.
  MetricsHttpServer(const Registry* registry, ReadinessCheck is_ready);
  // Stops the server (waits for in-flight requests).
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Listens on `address`: "PORT" (all IPv4 interfaces) or "IPV4:PORT" with a literal
  // address, e.g. "0.0.0.0:9090"; port 0 picks a free port (see port()). Host names and
  // IPv6 are not accepted. Errors: InvalidArgument for a malformed address,
  // FailedPrecondition if already started, Unavailable when it cannot listen (the message
  // carries the reason, e.g. "Address already in use").
  absl::Status Start(absl::string_view address);

  // Stops serving (closes every connection; a request being answered finishes first);
  // idempotent. Start may be called again afterwards.
  void Stop();

  // The bound port while running (the real one when started with port 0), else 0.
  int port() const { return port_; }

 private:
  friend class HttpCallbacks;  // libmicrohttpd's C callbacks (http_server.cc)

  // Answers one request; returns whether the response was queued.
  bool Handle(MHD_Connection* connection, absl::string_view path, absl::string_view method);
  void Log(std::string message);

  const Registry* const registry_;
  const ReadinessCheck is_ready_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;

  // libmicrohttpd reports why it failed to start only through its logger; Start collects
  // those messages for its Status. Outside Start they go to stderr.
  absl::Mutex log_mu_;
  bool starting_ ABSL_GUARDED_BY(log_mu_) = false;
  std::vector<std::string> start_log_ ABSL_GUARDED_BY(log_mu_);
};

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_HTTP_SERVER_H_
