// The HTTP front end: OpenAI's Images API over the generation service (GNU libmicrohttpd).
//   POST /v1/images/generations   JSON in; JSON out, or server-sent events with `stream`
//   GET  /v1/models               the loaded families in OpenAI's list format
//   GET  /v1/models/{id}          one family
//   GET  /                        the playground page (playground_page.h)
// Like the gRPC service it knows nothing of models beyond ModelSummary: JSON conversion lives
// in openai_images.h, and refusals, deadlines, logging and metrics in the generation service.
//
// Connections cost no thread (docs/http.md, "Connections"): a few threads each wait in epoll on
// their share of the sockets (libmicrohttpd's thread pool), and a request that waits for its
// generation suspends its connection, which the generation's events resume. So connections that
// send nothing useful cannot exhaust the front end: the idle timeout closes a silent one, the
// read deadline (read_deadlines.h) one that drips a request slower than it allows, a
// per-client cap bounds what one address holds open, and a HangupWatcher cancels the generation
// of a client that disconnects. Framing that could smuggle a second request (two
// Content-Lengths that differ, Content-Length with Transfer-Encoding) gets 400 and a closed
// connection, a transfer coding other than chunked 501 (RFC 9112).
#ifndef MULO_SERVER_HTTP_HTTP_FRONT_END_H_
#define MULO_SERVER_HTTP_HTTP_FRONT_END_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/api_keys.h"
#include "server/generation_service.h"
#include "server/http/hangup_watcher.h"
#include "server/http/image_store.h"
#include "server/http/read_deadlines.h"

struct MHD_Connection;
struct MHD_Daemon;

namespace mulo::server::http {

struct Exchange;  // one POST /v1/images/generations while it runs (http_front_end.cc)

struct HttpFrontEndOptions {
  std::string address = "0.0.0.0:8000";  // "PORT" or "IPV4:PORT"; port 0 picks a free one
  size_t max_body_bytes = 1 << 20;        // larger bodies get 413
  unsigned idle_timeout_seconds = 30;     // an idle connection is closed after this
  // A request (headers and body) must be read within this from its connection's opening or
  // its previous answer, however its bytes trickle in; 0: no limit.
  unsigned request_read_timeout_seconds = 10;
  unsigned max_connections = 4096;         // open at once (beyond: refused at accept)
  unsigned max_connections_per_client = 256;  // from one IP address; 0: no cap
  unsigned threads = 4;                       // epoll threads serving every connection
  // Origins whose browsers may call the API (CORS): each allowed Origin is echoed in
  // Access-Control-Allow-Origin and OPTIONS preflights are answered; "*" allows any. Empty:
  // no CORS headers, and OPTIONS gets 405.
  std::vector<std::string> cors_origins;
  // `response_format: "url"`: images kept this long within this much memory, at
  // <base>/v1/images/files/<id>.<ext>; the base is `public_url` when set (behind a proxy),
  // else the scheme and the request's Host.
  std::chrono::seconds image_url_ttl{3600};
  size_t image_url_max_bytes = 256 << 20;
  std::string public_url;
  // With keys: whether fetching an image URL needs a key too. By default a URL is a signed
  // link (128 random bits) that works without one while the key that made it is valid, as
  // clients that fetch OpenAI's URLs anonymously (LibreChat) expect.
  bool image_url_needs_key = false;
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
  void OnCompleted(MHD_Connection* connection, RequestState* state);
  // What can be answered from the headers alone (framing, preflight, keys, a declared size
  // over the limit); false when the request goes on to its body.
  bool AnswerFromHeaders(MHD_Connection* connection, const std::string& url,
                         const std::string& method, RequestState* state, bool* queued);
  bool Route(MHD_Connection* connection, const std::string& url, const std::string& method,
             RequestState* state);
  bool HandleGenerations(MHD_Connection* connection, RequestState* state);
  // The answer of a generation that was waited for (a suspended connection, resumed).
  bool AnswerGenerations(MHD_Connection* connection, RequestState* state);
  // Watches the suspended connection's hang-up for `exchange` (its client leaving cancels it)
  // and keeps the exchange until the request completes.
  void Track(MHD_Connection* connection, RequestState* state,
             const std::shared_ptr<Exchange>& exchange);
  bool HandleModels(MHD_Connection* connection, const std::string& url, RequestState* state);
  bool HandleImageFile(MHD_Connection* connection, const std::string& url, RequestState* state);
  // Where `state`'s request can fetch what the image store keeps.
  std::string PublicBase(const RequestState& state) const;
  // A refusal made before the generation service saw the request (401, 413): logged and
  // counted like the service's own when the path is the generations endpoint.
  bool RefuseBeforeReading(MHD_Connection* connection, const std::string& url,
                           const absl::Status& status, int http_status, RequestState* state);
  // The CORS headers a response to `state`'s Origin carries (none when it is not allowed).
  std::vector<std::pair<std::string, std::string>> CorsHeaders(const RequestState& state) const;
  bool OriginAllowed(const std::string& origin) const;

  const HttpFrontEndOptions options_;
  GenerationService* const service_;
  const int64_t created_;  // the models' `created`: when this server started
  HangupWatcher hangups_;
  ReadDeadlines read_deadlines_;
  ImageStore images_;
  // Set by Shutdown: suspended connections are resumed to be closed, none is suspended again.
  std::atomic<bool> stopping_{false};
  // Exchanges whose connection may be suspended, so that Shutdown can resume them all.
  std::mutex exchanges_mu_;
  std::set<std::shared_ptr<Exchange>> exchanges_;
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
