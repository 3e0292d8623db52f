#include "server/http/http_front_end.h"

#include <microhttpd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/client_text.h"
#include "server/http/live_json.h"
#include "server/http/openai_images.h"
#include "server/http/playground_page.h"
#include "server/listen_address.h"

namespace mulo::server::http {
namespace {

using Clock = GenerationService::Clock;
using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr char kJson[] = "application/json";
constexpr char kTimeoutHeader[] = "X-Mulo-Timeout";  // seconds; the body's `timeout` wins
constexpr char kRequestIdHeader[] = "X-Request-Id";
constexpr size_t kMaxRequestIdBytes = 128;

const char* Header(MHD_Connection* connection, const char* name) {
  return MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name);
}

int64_t UnixSeconds() { return absl::ToUnixSeconds(absl::Now()); }

// What every response carries beside its body: the request's id, CORS, and whether the
// connection closes after it.
struct Envelope {
  std::string request_id;
  Headers extra;
  bool close = false;
};

MHD_Response* AddEnvelope(MHD_Response* response, const Envelope& envelope) {
  if (!envelope.request_id.empty()) {
    MHD_add_response_header(response, kRequestIdHeader, envelope.request_id.c_str());
  }
  for (const auto& [name, value] : envelope.extra) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  if (envelope.close) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
  return response;
}

bool Send(MHD_Connection* connection, unsigned status, const char* content_type,
          const std::string& body, const Envelope& envelope) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return false;
  if (content_type != nullptr) MHD_add_response_header(response, "Content-Type", content_type);
  MHD_add_response_header(response, "Cache-Control", "no-store");
  AddEnvelope(response, envelope);
  // Both ask the client to come back: a full queue soon, a draining replica's balancer
  // elsewhere.
  if (status == 429) MHD_add_response_header(response, "Retry-After", "1");
  if (status == 503) MHD_add_response_header(response, "Retry-After", "5");
  if (status == 401) MHD_add_response_header(response, "WWW-Authenticate", "Bearer");
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued == MHD_YES;
}

bool SendError(MHD_Connection* connection, const absl::Status& status, int http_status,
               const Envelope& envelope) {
  return Send(connection, static_cast<unsigned>(http_status), kJson,
              ErrorJson(status, http_status), envelope);
}

// Every value of the request header `name` (case-insensitive), in order: libmicrohttpd keeps
// repeated headers apart, which the framing checks need.
std::vector<std::string> HeaderValues(MHD_Connection* connection, const char* name) {
  struct Collect {
    const char* name;
    std::vector<std::string> values;
  } collect{name, {}};
  MHD_get_connection_values(
      connection, MHD_HEADER_KIND,
      [](void* cls, MHD_ValueKind, const char* key, const char* value) -> MHD_Result {
        auto* c = static_cast<Collect*>(cls);
        if (key != nullptr && absl::EqualsIgnoreCase(key, c->name)) {
          c->values.push_back(value != nullptr ? value : "");
        }
        return MHD_YES;
      },
      &collect);
  return collect.values;
}

// RFC 9112 section 6: what a request's framing headers allow. OK, or the status that
// refuses it (and the connection closes after the answer).
struct Framing {
  int http_status = 0;  // 0: fine
  std::string problem;
};

Framing CheckFraming(MHD_Connection* connection) {
  const std::vector<std::string> lengths = HeaderValues(connection, "Content-Length");
  const std::vector<std::string> codings = HeaderValues(connection, "Transfer-Encoding");
  if (!lengths.empty() && !codings.empty()) {
    return {400, "Content-Length together with Transfer-Encoding: the body's length is ambiguous"};
  }
  // Several Content-Lengths (or one holding a list) are only acceptable when they agree.
  std::string length;
  for (const std::string& header : lengths) {
    for (absl::string_view part : absl::StrSplit(header, ',')) {
      const std::string value(absl::StripAsciiWhitespace(part));
      uint64_t bytes = 0;
      if (!absl::SimpleAtoi(value, &bytes) || value.empty() ||
          !std::all_of(value.begin(), value.end(), absl::ascii_isdigit)) {
        return {400, absl::StrCat("Content-Length: not a length (", value.substr(0, 32), ")")};
      }
      if (!length.empty() && value != length) {
        return {400, "Content-Length: given twice with different values"};
      }
      length = value;
    }
  }
  for (const std::string& header : codings) {
    if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(header), "chunked")) {
      return {501, absl::StrCat("Transfer-Encoding: only chunked is supported, got \"",
                                header.substr(0, 64), "\"")};
    }
  }
  if (codings.size() > 1) return {501, "Transfer-Encoding: chunked given more than once"};
  return {};
}

// A client's X-Request-Id, bounded and printable (it goes into logs and response headers).
std::string RequestIdOf(MHD_Connection* connection) {
  const char* header = Header(connection, kRequestIdHeader);
  if (header == nullptr) return "";
  std::string id(header, std::min(std::strlen(header), kMaxRequestIdBytes));
  for (char& c : id) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) c = '_';
  }
  return id;
}

}  // namespace

// One POST /v1/images/generations while its n generations run. Events arrive on worker
// threads; the connection is suspended while it waits for them (the whole result, or the next
// stream chunk) and an event that it waits for resumes it.
struct Exchange {
  Exchange(int n, bool stream) : stream(stream), remaining(n), images(n), statuses(n) {}

  void ClientGone() {
    std::vector<std::shared_ptr<GenerationService::Call>> to_cancel;
    {
      std::lock_guard<std::mutex> lock(mu);
      client_gone = true;
      to_cancel = calls;
    }
    for (const auto& call : to_cancel) call->ClientGone();
  }

  void AddCall(std::shared_ptr<GenerationService::Call> call) {
    bool gone;
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(call);
      gone = client_gone;
    }
    if (gone) call->ClientGone();
  }

  // Suspends the connection until WakeLocked (called with `mu` held, from the access handler
  // or the stream's content reader: libmicrohttpd allows it only there).
  void SuspendLocked() {
    suspended = true;
    MHD_suspend_connection(connection);
  }
  // Resumes the connection if it waits (with `mu` held, from any thread); never once the front
  // end has stopped (Shutdown resumed every suspended connection before libmicrohttpd stopped).
  void WakeLocked() {
    if (!suspended || stopping) return;
    suspended = false;
    MHD_resume_connection(connection);
  }

  // Generation `i`'s event (on a worker thread): a stream's partial image or completion, a
  // finished image or a status; wakes the connection when it waits for it.
  void Deliver(int i, GenerationEvent event) {
    std::lock_guard<std::mutex> lock(mu);
    switch (event.kind) {
      case GenerationEvent::Kind::kRows:
        if (stream && !event.preview.empty()) {
          chunks.push_back(
              PartialImageEvent(event.preview, event.preview_index, UnixSeconds(), echo));
        }
        break;
      case GenerationEvent::Kind::kImage:
        images[i] = FinishedImage{event.request_id, std::move(event)};
        break;
      case GenerationEvent::Kind::kDone:
        statuses[i] = event.status;
        if (stream) {
          chunks.push_back(event.status.ok()
                               ? CompletedEvent(images[i], UnixSeconds(), echo)
                               : ErrorEvent(event.status, HttpStatusOf(event.status, false)));
        }
        --remaining;
        break;
    }
    // A stream takes every chunk as it comes; a plain answer waits for all n images.
    if (stream || remaining == 0) WakeLocked();
  }

  const bool stream;
  std::mutex mu;
  MHD_Connection* connection = nullptr;
  bool suspended = false;
  int remaining;  // generations not done yet
  std::vector<FinishedImage> images;
  std::vector<absl::Status> statuses;
  std::vector<std::shared_ptr<GenerationService::Call>> calls;
  bool client_gone = false;
  bool stopping = false;  // the front end shuts down: end the stream, answer nothing
  // Streaming: server-sent events ready to send, and how much of the first was sent.
  std::deque<std::string> chunks;
  size_t sent_of_front = 0;
  // What the response and the stream's events say.
  ResponseEcho echo;
  bool urls = false;  // response_format url: images go to the store, the response has URLs
};

struct HttpFrontEnd::RequestState {
  std::string body;
  std::string request_id;  // the client's X-Request-Id, echoed on every response
  std::string origin;      // the client's Origin (CORS)
  std::string host;        // the client's Host (image URLs)
  std::string authorization;  // the client's Authorization ("" if none): an image URL's owner
  bool answered = false;   // refused from its headers: whatever body follows is dropped
  bool too_large = false;  // the body passed the limit while arriving
  uint64_t watch_id = 0;   // the hangup watch while a generation runs (0: none)
  std::shared_ptr<Exchange> exchange;
};

class HttpCallbacks {
 public:
  static MHD_Result Request(void* self, MHD_Connection* connection, const char* url,
                            const char* method, const char* /*version*/, const char* upload_data,
                            size_t* upload_data_size, void** request_state) {
    return static_cast<HttpFrontEnd*>(self)->OnRequest(
               connection, url, method, upload_data, upload_data_size,
               reinterpret_cast<HttpFrontEnd::RequestState**>(request_state))
               ? MHD_YES
               : MHD_NO;
  }

  static void Completed(void* self, MHD_Connection* connection, void** request_state,
                        MHD_RequestTerminationCode /*code*/) {
    auto* front_end = static_cast<HttpFrontEnd*>(self);
    front_end->read_deadlines_.Answered(connection);
    auto** state = reinterpret_cast<HttpFrontEnd::RequestState**>(request_state);
    if (*state == nullptr) return;
    front_end->OnCompleted(connection, *state);
    *state = nullptr;
  }

  static void Connection(void* self, MHD_Connection* connection, void** /*socket_context*/,
                         MHD_ConnectionNotificationCode code) {
    auto* front_end = static_cast<HttpFrontEnd*>(self);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      const MHD_ConnectionInfo* info =
          MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      front_end->read_deadlines_.Opened(connection, info != nullptr ? info->connect_fd : -1);
    } else {
      front_end->read_deadlines_.Closed(connection);
    }
  }

  static void Log(void* /*self*/, const char* format, va_list args) {
    char text[512];
    std::vsnprintf(text, sizeof(text), format, args);
    std::fprintf(stderr, "http: %s", text);
  }

  // The stream's content reader: the next event's bytes, or, when none is ready, the
  // connection suspended until an event resumes it (no thread waits).
  static ssize_t ReadStream(void* cls, uint64_t /*pos*/, char* buffer, size_t max) {
    auto* exchange = static_cast<Exchange*>(cls);
    std::lock_guard<std::mutex> lock(exchange->mu);
    if (exchange->stopping) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (exchange->chunks.empty()) {
      if (exchange->remaining == 0) return MHD_CONTENT_READER_END_OF_STREAM;
      exchange->SuspendLocked();
      return 0;
    }
    const std::string& front = exchange->chunks.front();
    const size_t n = std::min(max, front.size() - exchange->sent_of_front);
    std::memcpy(buffer, front.data() + exchange->sent_of_front, n);
    exchange->sent_of_front += n;
    if (exchange->sent_of_front == front.size()) {
      exchange->chunks.pop_front();
      exchange->sent_of_front = 0;
    }
    return static_cast<ssize_t>(n);
  }
};

HttpFrontEnd::HttpFrontEnd(const HttpFrontEndOptions& options, GenerationService* service)
    : options_(options),
      service_(service),
      created_(UnixSeconds()),
      read_deadlines_(std::chrono::seconds(options.request_read_timeout_seconds)),
      images_(options.image_url_ttl, options.image_url_max_bytes) {}

HttpFrontEnd::~HttpFrontEnd() { Shutdown(); }

absl::StatusOr<std::unique_ptr<HttpFrontEnd>> HttpFrontEnd::Start(
    const HttpFrontEndOptions& options, GenerationService* service) {
  auto address = ParseListenAddress(options.address, "HTTP address");
  if (!address.ok()) return address.status();
  std::unique_ptr<HttpFrontEnd> front_end(new HttpFrontEnd(options, service));
  if (!front_end->hangups_.status().ok()) return front_end->hangups_.status();
  const bool tls = !options.tls_cert_pem.empty() || !options.tls_key_pem.empty();
  if (tls && (options.tls_cert_pem.empty() || options.tls_key_pem.empty())) {
    return absl::InvalidArgumentError("HTTP front end: TLS needs a certificate and a key");
  }
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    return absl::FailedPreconditionError("HTTP front end: this libmicrohttpd has no TLS");
  }
  // A few epoll threads for every connection; waiting requests suspend theirs (ITC lets a
  // resume from a worker thread wake its epoll thread at once). MHD reads the PEM strings
  // while starting.
  const unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC |
                         MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0);
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_SOCK_ADDR, 0, &*address},
      {MHD_OPTION_THREAD_POOL_SIZE, std::max(1u, options.threads), nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, options.idle_timeout_seconds, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, options.max_connections, nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, options.max_connections_per_client, nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&HttpCallbacks::Completed),
       front_end.get()},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&HttpCallbacks::Connection),
       front_end.get()}};
  if (tls) {
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(options.tls_cert_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(options.tls_key_pem.c_str())});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  front_end->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &HttpCallbacks::Request, front_end.get(),
      MHD_OPTION_EXTERNAL_LOGGER, &HttpCallbacks::Log, front_end.get(),
      MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (front_end->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("HTTP front end cannot listen on ",
                                               options.address));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(front_end->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  if (info == nullptr || info->port == 0) {
    return absl::InternalError("HTTP front end: no listening port reported");
  }
  front_end->port_ = info->port;
  return front_end;
}

void HttpFrontEnd::Shutdown(absl::Duration grace) {
  if (daemon_ == nullptr) return;
  {
    std::unique_lock<std::mutex> lock(requests_mu_);
    requests_done_.wait_for(lock, absl::ToChronoNanoseconds(grace),
                            [this] { return requests_in_progress_ == 0; });
  }
  // libmicrohttpd must not stop with a connection suspended: wake every one that waits, and
  // let none suspend again (they close: the handler answers MHD_NO, a stream ends).
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(exchanges_mu_);
    for (const auto& exchange : exchanges_) {
      std::lock_guard<std::mutex> exchange_lock(exchange->mu);
      exchange->WakeLocked();
      exchange->stopping = true;
    }
  }
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
  port_ = 0;
}

void HttpFrontEnd::OnCompleted(MHD_Connection* /*connection*/, RequestState* state) {
  {
    std::lock_guard<std::mutex> lock(requests_mu_);
    --requests_in_progress_;
  }
  requests_done_.notify_all();
  if (state->watch_id != 0) hangups_.Unwatch(state->watch_id);
  if (state->exchange != nullptr) {
    // A request that ends before its generation (the client went, the connection broke)
    // stops it.
    state->exchange->ClientGone();
    std::lock_guard<std::mutex> lock(exchanges_mu_);
    exchanges_.erase(state->exchange);
  }
  delete state;
}

bool HttpFrontEnd::OriginAllowed(const std::string& origin) const {
  if (origin.empty()) return false;
  for (const std::string& allowed : options_.cors_origins) {
    if (allowed == "*" || allowed == origin) return true;
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> HttpFrontEnd::CorsHeaders(
    const RequestState& state) const {
  if (!OriginAllowed(state.origin)) return {};
  return {{"Access-Control-Allow-Origin", state.origin},
          {"Vary", "Origin"},
          {"Access-Control-Expose-Headers", "X-Request-Id, Retry-After"}};
}

bool HttpFrontEnd::AnswerFromHeaders(MHD_Connection* connection, const std::string& url,
                                     const std::string& method, RequestState* state,
                                     bool* queued) {
  Envelope envelope{state->request_id, CorsHeaders(*state), false};
  // Framing that could let a second request hide in the first's body: refused, and the
  // connection closed after the answer (RFC 9112, 6.1 and 6.3).
  if (const Framing framing = CheckFraming(connection); framing.http_status != 0) {
    envelope.close = true;
    *queued = SendError(connection, absl::InvalidArgumentError(framing.problem),
                        framing.http_status, envelope);
    return true;
  }
  if (method == MHD_HTTP_METHOD_OPTIONS) {
    // A CORS preflight for an allowed origin; otherwise OPTIONS is not served.
    if (!options_.cors_origins.empty() && OriginAllowed(state->origin)) {
      envelope.extra.push_back({"Access-Control-Allow-Methods", "GET, POST, OPTIONS"});
      envelope.extra.push_back(
          {"Access-Control-Allow-Headers",
           "Authorization, Content-Type, X-Request-Id, X-Mulo-Timeout"});
      envelope.extra.push_back({"Access-Control-Max-Age", "600"});
      *queued = Send(connection, 204, nullptr, "", envelope);
      return true;
    }
    return false;  // Route answers 405 with Allow
  }
  if (options_.api_keys != nullptr && absl::StartsWith(url, "/v1/")) {
    const char* authorization = Header(connection, MHD_HTTP_HEADER_AUTHORIZATION);
    if (authorization != nullptr) state->authorization = authorization;
    // An image URL without a key is a signed link: HandleImageFile checks that the key which
    // made the image is still valid.
    if (authorization == nullptr && !options_.image_url_needs_key &&
        absl::StartsWith(url, "/v1/images/files/")) {
      return false;
    }
    const absl::Status authorized = options_.api_keys->Authorize(state->authorization);
    if (!authorized.ok()) {
      *queued = RefuseBeforeReading(connection, url, authorized, 401, state);
      return true;
    }
  }
  if (const char* length = Header(connection, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
    uint64_t bytes = 0;
    if (absl::SimpleAtoi(length, &bytes) && bytes > options_.max_body_bytes) {
      *queued = RefuseBeforeReading(
          connection, url,
          absl::InvalidArgumentError(
              absl::StrCat("body: ", bytes, " bytes; at most ", options_.max_body_bytes)),
          413, state);
      return true;
    }
  }
  return false;
}

bool HttpFrontEnd::OnRequest(MHD_Connection* connection, const std::string& url,
                             const std::string& method, const char* upload_data,
                             size_t* upload_data_size, RequestState** state) {
  if (*state == nullptr) {
    // Headers only: what they alone decide is answered before any body is read.
    *state = new RequestState();
    (*state)->request_id = RequestIdOf(connection);
    if (const char* origin = Header(connection, "Origin")) (*state)->origin = origin;
    if (const char* host = Header(connection, MHD_HTTP_HEADER_HOST)) (*state)->host = host;
    {
      std::lock_guard<std::mutex> lock(requests_mu_);
      ++requests_in_progress_;
    }
    bool queued = true;
    if (AnswerFromHeaders(connection, url, method, *state, &queued)) {
      (*state)->answered = true;
      return queued;
    }
    return true;
  }
  if ((*state)->answered) {
    *upload_data_size = 0;  // the response is queued: drop the rest
    return true;
  }
  if ((*state)->exchange != nullptr) {
    // Resumed: the generations it waited for are done (or the front end stops).
    if (stopping_) return false;
    return AnswerGenerations(connection, *state);
  }
  if (*upload_data_size > 0) {
    if ((*state)->body.size() + *upload_data_size > options_.max_body_bytes) {
      (*state)->too_large = true;  // read and dropped; answered once the body has arrived
      (*state)->body.clear();
    } else if (!(*state)->too_large) {
      (*state)->body.append(upload_data, *upload_data_size);
    }
    *upload_data_size = 0;
    return true;
  }
  // The whole request has been read: from here it is handled, not timed by the read deadline.
  read_deadlines_.RequestRead(connection);
  if ((*state)->too_large) {
    return RefuseBeforeReading(
        connection, url,
        absl::InvalidArgumentError(absl::StrCat("body: more than ", options_.max_body_bytes,
                                                " bytes")),
        413, *state);
  }
  return Route(connection, url, method, *state);
}

bool HttpFrontEnd::Route(MHD_Connection* connection, const std::string& url,
                         const std::string& method, RequestState* state) {
  Envelope envelope{state->request_id, CorsHeaders(*state), false};
  const bool cors = !options_.cors_origins.empty();
  // 405 names the methods the path takes (Allow, RFC 9110 15.5.6).
  auto wrong_method = [&](const char* allow) {
    envelope.extra.push_back({"Allow", cors ? absl::StrCat(allow, ", OPTIONS") : allow});
    return SendError(connection,
                     absl::InvalidArgumentError(absl::StrCat("method: ", url, " takes ", allow)),
                     405, envelope);
  };
  if (url == "/" || url == "/index.html") {
    if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
      return wrong_method("GET, HEAD");
    }
    return Send(connection, 200, "text/html; charset=utf-8", PlaygroundHtml(), envelope);
  }
  if (url == "/v1/images/generations") {
    if (method != MHD_HTTP_METHOD_POST) return wrong_method("POST");
    return HandleGenerations(connection, state);
  }
  if (absl::StartsWith(url, "/v1/images/files/")) {
    if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
      return wrong_method("GET, HEAD");
    }
    return HandleImageFile(connection, url, state);
  }
  if (url == "/v1/models" || absl::StartsWith(url, "/v1/models/")) {
    if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
      return wrong_method("GET, HEAD");
    }
    return HandleModels(connection, url, state);
  }
  if (url == "/v1/live") {
    if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
      return wrong_method("GET, HEAD");
    }
    return Send(connection, 200, kJson, LiveJson(service_->Live()), envelope);
  }
  return SendError(connection,
                   absl::NotFoundError(absl::StrCat("path: no route ", method, " ", url)), 404,
                   envelope);
}

bool HttpFrontEnd::RefuseBeforeReading(MHD_Connection* connection, const std::string& url,
                                       const absl::Status& status, int http_status,
                                       RequestState* state) {
  if (url == "/v1/images/generations") {
    GenerationService::CallOptions options;
    options.protocol = "http";
    service_->RecordRefused(state->request_id, "", options, status);
  }
  return SendError(connection, status, http_status,
                   Envelope{state->request_id, CorsHeaders(*state), false});
}

bool HttpFrontEnd::HandleModels(MHD_Connection* connection, const std::string& url,
                                RequestState* state) {
  const Envelope envelope{state->request_id, CorsHeaders(*state), false};
  if (url == "/v1/models") {
    auto models = service_->ListModels();
    if (!models.ok()) return SendError(connection, models.status(), 503, envelope);
    return Send(connection, 200, kJson, ModelListJson(*models, created_), envelope);
  }
  auto model = service_->GetModel(url.substr(std::strlen("/v1/models/")), "model");
  if (!model.ok()) {
    return SendError(connection, model.status(), HttpStatusOf(model.status(), false), envelope);
  }
  return Send(connection, 200, kJson, ModelJson(*model, created_), envelope);
}

std::string HttpFrontEnd::PublicBase(const RequestState& state) const {
  if (!options_.public_url.empty()) {
    return std::string(absl::StripSuffix(options_.public_url, "/"));
  }
  const bool tls = !options_.tls_cert_pem.empty();
  const std::string host =
      !state.host.empty() ? state.host : absl::StrCat("127.0.0.1:", port_);
  return absl::StrCat(tls ? "https://" : "http://", host);
}

bool HttpFrontEnd::HandleImageFile(MHD_Connection* connection, const std::string& url,
                                   RequestState* state) {
  const Envelope envelope{state->request_id, CorsHeaders(*state), false};
  absl::string_view name = url;
  absl::ConsumePrefix(&name, "/v1/images/files/");
  const std::string id(name.substr(0, name.find('.')));
  const auto image = images_.Get(id);
  if (!image) {
    return SendError(connection,
                     absl::NotFoundError(absl::StrCat(
                         "path: no image ", Quoted(std::string(name)),
                         " (images are kept ", images_.ttl().count(), " s; --image_url_ttl)")),
                     404, envelope);
  }
  if (options_.api_keys != nullptr && state->authorization.empty() &&
      !options_.api_keys->Authorize(image->owner).ok()) {
    return SendError(connection,
                     absl::UnauthenticatedError(
                         "authorization: the key that made this image is no longer valid; "
                         "send \"Authorization: Bearer <key>\""),
                     401, envelope);
  }
  return Send(connection, 200, image->content_type.c_str(), image->bytes, envelope);
}

namespace {

// The request's timeout: the body's `timeout`, else the X-Timeout header's seconds, else none.
// INVALID_ARGUMENT naming the header when it is not seconds in (0, 86400].
absl::StatusOr<std::optional<double>> RequestTimeout(MHD_Connection* connection,
                                                     const ImagesRequest& images) {
  if (images.timeout_seconds) return images.timeout_seconds;
  const char* header = Header(connection, kTimeoutHeader);
  if (header == nullptr) return std::optional<double>();
  double seconds = 0;
  if (!absl::SimpleAtod(header, &seconds) || !(seconds > 0 && seconds <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout: header ", kTimeoutHeader, " must be seconds in (0, 86400]"));
  }
  return std::optional<double>(seconds);
}

// A streamed answer: server-sent events as the exchange's chunks arrive.
bool StartEventStream(MHD_Connection* connection, Exchange* exchange, const Envelope& envelope) {
  MHD_Response* response = MHD_create_response_from_callback(
      MHD_SIZE_UNKNOWN, 64 * 1024, &HttpCallbacks::ReadStream, exchange, nullptr);
  if (response == nullptr) return false;
  MHD_add_response_header(response, "Content-Type", "text/event-stream");
  MHD_add_response_header(response, "Cache-Control", "no-store");
  MHD_add_response_header(response, "X-Accel-Buffering", "no");  // proxies: do not buffer
  AddEnvelope(response, envelope);
  const MHD_Result queued = MHD_queue_response(connection, 200, response);
  MHD_destroy_response(response);
  return queued == MHD_YES;
}

}  // namespace

bool HttpFrontEnd::HandleGenerations(MHD_Connection* connection, RequestState* state) {
  GenerationService::CallOptions options;
  options.protocol = "http";
  options.arrived = Clock::now();
  const std::string& base_id = state->request_id;
  const Envelope envelope{base_id, CorsHeaders(*state), false};
  // Refused before a generation starts: logged and counted by the service all the same.
  const auto refuse = [&](const absl::Status& status, const std::string& model) {
    service_->RecordRefused(base_id, model, options, status);
    return SendError(connection, status, HttpStatusOf(status, false), envelope);
  };

  auto parsed = ParseImagesRequest(state->body);
  if (!parsed.ok()) return refuse(parsed.status(), "");
  ImagesRequest& images = *parsed;
  options.user = images.user;
  // No model: the server's default family (OpenAI's SDKs send none unless asked to).
  if (images.request.model().empty()) images.request.set_model(service_->DefaultModel());
  auto model = service_->GetModel(images.request.model(), "model");
  if (!model.ok()) {
    if (absl::IsNotFound(model.status()) && images.request.model().empty()) {
      return refuse(absl::InvalidArgumentError("model: required"), "");
    }
    return refuse(model.status(), images.request.model());
  }
  const absl::StatusOr<std::optional<double>> timeout = RequestTimeout(connection, images);
  if (!timeout.ok()) return refuse(timeout.status(), images.request.model());
  if (*timeout) {
    options.deadline = options.arrived + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(**timeout));
  }

  auto exchange = std::make_shared<Exchange>(images.n, images.stream);
  exchange->connection = connection;
  exchange->echo.size = ApplySize(&images, *model);
  exchange->echo.output_format = images.output_format;
  exchange->echo.quality = images.quality;
  exchange->echo.background = "opaque";  // what the families draw, whatever was asked
  exchange->echo.input_tokens = model->condition_rows;
  exchange->urls = images.response_format == "url";
  const uint64_t seed = images.request.sampling().seed();
  for (int i = 0; i < images.n; ++i) {
    v1::GenerateRequest request = images.request;
    request.mutable_sampling()->set_seed(seed + static_cast<uint64_t>(i));  // wraps at 2^64
    if (!base_id.empty()) {
      request.set_request_id(images.n == 1 ? base_id : absl::StrCat(base_id, "-", i));
    }
    std::weak_ptr<Exchange> weak = exchange;
    auto call = service_->Start(request, options, [weak, i](GenerationEvent event) {
      if (auto ex = weak.lock()) ex->Deliver(i, std::move(event));
    });
    if (!call.ok()) {
      // Stop what already started; its events go nowhere.
      exchange->ClientGone();
      const bool queue_full = absl::IsUnavailable(call.status()) && service_->ready();
      return SendError(connection, call.status(), HttpStatusOf(call.status(), queue_full),
                       envelope);
    }
    if (i == 0) {
      std::lock_guard<std::mutex> lock(exchange->mu);
      exchange->echo.method = (*call)->request().plan.method;
    }
    exchange->AddCall(*std::move(call));
  }

  Track(connection, state, exchange);
  if (stopping_) return false;

  if (images.stream) return StartEventStream(connection, exchange.get(), envelope);
  {
    std::lock_guard<std::mutex> lock(exchange->mu);
    if (exchange->remaining > 0) {
      exchange->SuspendLocked();  // the last generation's done event resumes it
      return true;
    }
  }
  return AnswerGenerations(connection, state);
}

void HttpFrontEnd::Track(MHD_Connection* connection, RequestState* state,
                         const std::shared_ptr<Exchange>& exchange) {
  // While it generates, the connection is suspended (libmicrohttpd does not read it then):
  // its hang-up is watched here, so that a client that leaves stops its generation.
  const MHD_ConnectionInfo* fd_info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  const int fd = fd_info != nullptr ? fd_info->connect_fd : -1;
  std::weak_ptr<Exchange> weak = exchange;
  state->watch_id = fd >= 0 ? hangups_.Watch(fd, [weak] {
    if (auto ex = weak.lock()) ex->ClientGone();
  })
                            : 0;
  state->exchange = exchange;
  std::lock_guard<std::mutex> lock(exchanges_mu_);
  exchanges_.insert(exchange);
}

bool HttpFrontEnd::AnswerGenerations(MHD_Connection* connection, RequestState* state) {
  Exchange& exchange = *state->exchange;
  if (state->watch_id != 0) {
    hangups_.Unwatch(state->watch_id);
    state->watch_id = 0;
  }
  const Envelope envelope{state->request_id, CorsHeaders(*state), false};
  std::lock_guard<std::mutex> lock(exchange.mu);
  if (exchange.remaining > 0) {  // resumed early (a stray wake): wait on
    exchange.SuspendLocked();
    return true;
  }
  if (exchange.client_gone) return false;  // nobody to answer: close the connection
  for (const absl::Status& status : exchange.statuses) {
    if (!status.ok()) return SendError(connection, status, HttpStatusOf(status, false), envelope);
  }
  std::vector<std::string> urls;
  if (exchange.urls) {
    const std::string base = PublicBase(*state);
    const std::string& format = exchange.echo.output_format;
    for (const FinishedImage& image : exchange.images) {
      const std::string id =
          images_.Put(image.image.image, absl::StrCat("image/", format), state->authorization);
      urls.push_back(absl::StrCat(base, "/v1/images/files/", id, ".", format));
    }
  }
  return Send(connection, 200, kJson,
              ImagesResponseJson(UnixSeconds(), exchange.echo, exchange.images, urls), envelope);
}

}  // namespace mulo::server::http
