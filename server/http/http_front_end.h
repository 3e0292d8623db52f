// The HTTP front end: OpenAI's Images API over the generation service (GNU libmicrohttpd).
//   POST /v1/images/generations   JSON in; JSON out, or server-sent events with `stream`
//   GET  /v1/models               the loaded families in OpenAI's list format
//   GET  /v1/models/{id}          one family
//   GET  /                        the playground page (playground_page.h)
// Like the gRPC service it knows nothing of models beyond ModelSummary: JSON conversion lives
// in openai_images.h, and refusals, deadlines, logging and metrics in the generation service.
// Each connection has its own thread (bounded by max_connections): a request waits for its
// generation's events there, woken by each event; a HangupWatcher cancels the generation of
// a client that disconnects.
#ifndef MULO_SERVER_HTTP_HTTP_FRONT_END_H_
#define MULO_SERVER_HTTP_HTTP_FRONT_END_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/api_keys.h"
#include "server/generation_service.h"
#include "server/http/hangup_watcher.h"

struct MHD_Connection;
struct MHD_Daemon;

namespace mulo::server::http {

struct HttpFrontEndOptions {
  std::string address = "0.0.0.0:8000";  // "PORT" or "IPV4:PORT"; port 0 picks a free one
  size_t max_body_bytes = 1 << 20;        // larger bodies get 413
  unsigned idle_timeout_seconds = 30;     // an idle connection is closed after this
  unsigned max_connections = 256;         // each is a thread while open
  // With keys, /v1/ paths need "Authorization: Bearer <key>" (401 otherwise); the playground
  // page stays open. Null: no keys. Must outlive the front end.
  const ApiKeys* api_keys = nullptr;
  // PEM certificate chain and key (mulo_server's --tls_cert / --tls_key): with both, the port
  // speaks HTTPS only.
  std::string tls_cert_pem;
  std::string tls_key_pem;
};

class HttpFrontEnd {
 public:
  // Listens and serves `service` (which must outlive the front end).
  static absl::StatusOr<std::unique_ptr<HttpFrontEnd>> Start(const HttpFrontEndOptions& options,
                                                             GenerationService* service);
  ~HttpFrontEnd();
  HttpFrontEnd(const HttpFrontEnd&) = delete;
  HttpFrontEnd& operator=(const HttpFrontEnd&) = delete;

  int port() const { return port_; }
  // Waits up to `grace` for the requests in progress to be answered (drain the generation
  // service first: then only their responses are still being sent), then closes the listening
  // socket and every connection; idempotent.
  void Shutdown(absl::Duration grace = absl::ZeroDuration());

 private:
  friend class HttpCallbacks;
  struct RequestState;

  HttpFrontEnd(const HttpFrontEndOptions& options, GenerationService* service);
  // libmicrohttpd's access handler and completion callback (http_front_end.cc).
  bool OnRequest(MHD_Connection* connection, const std::string& url, const std::string& method,
                 const char* upload_data, size_t* upload_data_size, RequestState** state);
  void OnCompleted(RequestState* state);
  bool HandleGenerations(MHD_Connection* connection, RequestState* state);
  bool HandleModels(MHD_Connection* connection, const std::string& url);
  // A refusal made before the generation service saw the request (401, 413): logged and
  // counted like the service's own when the path is the generations endpoint.
  bool RefuseBeforeReading(MHD_Connection* connection, const std::string& url,
                           const absl::Status& status, int http_status);

  const HttpFrontEndOptions options_;
  GenerationService* const service_;
  const int64_t created_;  // the models' `created`: when this server started
  HangupWatcher hangups_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
  // Requests between their headers and their completion (a connection idle between requests
  // holds none), so that Shutdown lets their responses go out.
  std::mutex requests_mu_;
  std::condition_variable requests_done_;
  int requests_in_progress_ = 0;
};

}  // namespace mulo::server::http

#endif  // MULO_SERVER_HTTP_HTTP_FRONT_END_H_
