#include "server/http/http_front_end.h"

#include <microhttpd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/openai_images.h"
#include "server/http/playground_page.h"
#include "server/listen_address.h"

namespace mulo::server::http {
namespace {

using Clock = GenerationService::Clock;

constexpr char kJson[] = "application/json";
constexpr char kTimeoutHeader[] = "X-Mulo-Timeout";  // seconds; the body's `timeout` wins

const char* Header(MHD_Connection* connection, const char* name) {
  return MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name);
}

bool Send(MHD_Connection* connection, unsigned status, const char* content_type,
          const std::string& body, const std::string& request_id = "") {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return false;
  MHD_add_response_header(response, "Content-Type", content_type);
  MHD_add_response_header(response, "Cache-Control", "no-store");
  if (!request_id.empty()) MHD_add_response_header(response, "X-Request-Id", request_id.c_str());
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
               const std::string& request_id = "") {
  return Send(connection, static_cast<unsigned>(http_status), kJson,
              ErrorJson(status, http_status), request_id);
}

int64_t UnixSeconds() { return absl::ToUnixSeconds(absl::Now()); }

// One POST /v1/images/generations while its n generations run. Events arrive on worker
// threads; the connection's thread waits on `cv` for them (the whole result, or the next
// stream chunk).
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

  const bool stream;
  std::mutex mu;
  std::condition_variable cv;
  int remaining;                    // generations not done yet
  std::vector<FinishedImage> images;
  std::vector<absl::Status> statuses;
  std::vector<std::shared_ptr<GenerationService::Call>> calls;
  bool client_gone = false;
  // Streaming: server-sent events ready to send, and how much of the first was sent.
  std::deque<std::string> chunks;
  size_t sent_of_front = 0;
  // What the stream's events say.
  std::string size, output_format, method;
  int64_t input_tokens = 0;
};

}  // namespace

struct HttpFrontEnd::RequestState {
  std::string body;
  bool answered = false;   // refused from its headers: whatever body follows is dropped
  bool too_large = false;  // the body passed the limit while arriving
  uint64_t watch_id = 0;  // the hangup watch while a stream is open (0: none)
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

  static void Completed(void* self, MHD_Connection* /*connection*/, void** request_state,
                        MHD_RequestTerminationCode /*code*/) {
    auto** state = reinterpret_cast<HttpFrontEnd::RequestState**>(request_state);
    if (*state == nullptr) return;
    static_cast<HttpFrontEnd*>(self)->OnCompleted(*state);
    *state = nullptr;
  }

  static void Log(void* /*self*/, const char* format, va_list args) {
    char text[512];
    std::vsnprintf(text, sizeof(text), format, args);
    std::fprintf(stderr, "http: %s", text);
  }

  // The stream's content reader: blocks (on the connection's own thread) until the next
  // event is ready.
  static ssize_t ReadStream(void* cls, uint64_t /*pos*/, char* buffer, size_t max) {
    auto* exchange = static_cast<Exchange*>(cls);
    std::unique_lock<std::mutex> lock(exchange->mu);
    exchange->cv.wait(lock, [&] { return !exchange->chunks.empty() || exchange->remaining == 0; });
    if (exchange->chunks.empty()) return MHD_CONTENT_READER_END_OF_STREAM;
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
    : options_(options), service_(service), created_(UnixSeconds()) {}

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
  // A thread per connection: a request may wait for its generation (or its stream's next
  // event) without holding up any other connection. MHD reads the PEM strings while starting.
  const unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                         MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0);
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_SOCK_ADDR, 0, &*address},
      {MHD_OPTION_CONNECTION_TIMEOUT, options.idle_timeout_seconds, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, options.max_connections, nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&HttpCallbacks::Completed),
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
  MHD_stop_daemon(daemon_);  // joins every connection's thread
  daemon_ = nullptr;
  port_ = 0;
}

void HttpFrontEnd::OnCompleted(RequestState* state) {
  {
    std::lock_guard<std::mutex> lock(requests_mu_);
    --requests_in_progress_;
  }
  requests_done_.notify_all();
  if (state->watch_id != 0) hangups_.Unwatch(state->watch_id);
  // A stream that ends before its generation (the client went, the connection broke) stops it.
  if (state->exchange != nullptr) state->exchange->ClientGone();
  delete state;
}

bool HttpFrontEnd::OnRequest(MHD_Connection* connection, const std::string& url,
                             const std::string& method, const char* upload_data,
                             size_t* upload_data_size, RequestState** state) {
  if (*state == nullptr) {
    // Headers only: a caller without a key, or a declared body over the limit, is refused
    // before the body is read.
    *state = new RequestState();
    {
      std::lock_guard<std::mutex> lock(requests_mu_);
      ++requests_in_progress_;
    }
    if (options_.api_keys != nullptr && absl::StartsWith(url, "/v1/")) {
      const char* authorization = Header(connection, MHD_HTTP_HEADER_AUTHORIZATION);
      const absl::Status authorized =
          options_.api_keys->Authorize(authorization != nullptr ? authorization : "");
      if (!authorized.ok()) {
        (*state)->answered = true;
        return RefuseBeforeReading(connection, url, authorized, 401);
      }
    }
    if (const char* length = Header(connection, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
      uint64_t bytes = 0;
      if (absl::SimpleAtoi(length, &bytes) && bytes > options_.max_body_bytes) {
        (*state)->answered = true;
        return RefuseBeforeReading(
            connection, url,
            absl::InvalidArgumentError(
                absl::StrCat("body: ", bytes, " bytes; at most ", options_.max_body_bytes)),
            413);
      }
    }
    return true;
  }
  if ((*state)->answered) {
    *upload_data_size = 0;  // the response is queued: drop the rest
    return true;
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
  if ((*state)->too_large) {
    return RefuseBeforeReading(
        connection, url,
        absl::InvalidArgumentError(absl::StrCat("body: more than ", options_.max_body_bytes,
                                                " bytes")),
        413);
  }
  if (url == "/" || url == "/index.html") {
    if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
      return SendError(connection, absl::InvalidArgumentError("method: / takes GET"), 405);
    }
    return Send(connection, 200, "text/html; charset=utf-8", PlaygroundHtml());
  }
  if (url == "/v1/images/generations") {
    if (method != MHD_HTTP_METHOD_POST) {
      return SendError(connection,
                       absl::InvalidArgumentError("method: /v1/images/generations takes POST"),
                       405);
    }
    return HandleGenerations(connection, *state);
  }
  if (url == "/v1/models" || absl::StartsWith(url, "/v1/models/")) {
    if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
      return SendError(connection, absl::InvalidArgumentError("method: /v1/models takes GET"),
                       405);
    }
    return HandleModels(connection, url);
  }
  return SendError(connection,
                   absl::NotFoundError(absl::StrCat("path: no route ", method, " ", url)), 404);
}

bool HttpFrontEnd::RefuseBeforeReading(MHD_Connection* connection, const std::string& url,
                                       const absl::Status& status, int http_status) {
  if (url == "/v1/images/generations") {
    GenerationService::CallOptions options;
    options.protocol = "http";
    service_->RecordRefused("", "", options, status);
  }
  return SendError(connection, status, http_status);
}

bool HttpFrontEnd::HandleModels(MHD_Connection* connection, const std::string& url) {
  if (url == "/v1/models") {
    auto models = service_->ListModels();
    if (!models.ok()) return SendError(connection, models.status(), 503);
    return Send(connection, 200, kJson, ModelListJson(*models, created_));
  }
  auto model = service_->GetModel(url.substr(std::strlen("/v1/models/")), "model");
  if (!model.ok()) {
    return SendError(connection, model.status(), HttpStatusOf(model.status(), false));
  }
  return Send(connection, 200, kJson, ModelJson(*model, created_));
}

bool HttpFrontEnd::HandleGenerations(MHD_Connection* connection, RequestState* state) {
  GenerationService::CallOptions options;
  options.protocol = "http";
  options.arrived = Clock::now();
  const char* id_header = Header(connection, "X-Request-Id");
  const std::string base_id = id_header != nullptr ? std::string(id_header) : "";
  // Refused before a generation starts: logged and counted by the service all the same.
  const auto refuse = [&](const absl::Status& status, const std::string& model) {
    service_->RecordRefused(base_id, model, options, status);
    return SendError(connection, status, HttpStatusOf(status, false), base_id);
  };

  auto parsed = ParseImagesRequest(state->body);
  if (!parsed.ok()) return refuse(parsed.status(), "");
  ImagesRequest& images = *parsed;
  options.user = images.user;
  auto model = service_->GetModel(images.request.model(), "model");
  if (!model.ok()) {
    if (absl::IsNotFound(model.status()) && images.request.model().empty()) {
      return refuse(absl::InvalidArgumentError("model: required"), "");
    }
    return refuse(model.status(), images.request.model());
  }
  if (absl::Status size = CheckSize(images.size, *model); !size.ok()) {
    return refuse(size, images.request.model());
  }
  std::optional<double> timeout = images.timeout_seconds;
  if (!timeout) {
    if (const char* header = Header(connection, kTimeoutHeader)) {
      double seconds = 0;
      if (!absl::SimpleAtod(header, &seconds) || !(seconds > 0 && seconds <= 86400)) {
        return refuse(absl::InvalidArgumentError(absl::StrCat(
                          "timeout: header ", kTimeoutHeader, " must be seconds in (0, 86400]")),
                      images.request.model());
      }
      timeout = seconds;
    }
  }
  if (timeout) {
    options.deadline = options.arrived + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(*timeout));
  }

  auto exchange = std::make_shared<Exchange>(images.n, images.stream);
  exchange->size = absl::StrCat(model->image_width, "x", model->image_height);
  exchange->output_format = images.output_format;
  exchange->input_tokens = model->condition_rows;
  const uint64_t seed = images.request.sampling().seed();
  for (int i = 0; i < images.n; ++i) {
    v1::GenerateRequest request = images.request;
    request.mutable_sampling()->set_seed(seed + static_cast<uint64_t>(i));  // wraps at 2^64
    if (!base_id.empty()) {
      request.set_request_id(images.n == 1 ? base_id : absl::StrCat(base_id, "-", i));
    }
    std::weak_ptr<Exchange> weak = exchange;
    auto call = service_->Start(request, options, [weak, i](GenerationEvent event) {
      auto ex = weak.lock();
      if (ex == nullptr) return;
      std::lock_guard<std::mutex> lock(ex->mu);
      switch (event.kind) {
        case GenerationEvent::Kind::kRows:
          if (ex->stream && !event.preview.empty()) {
            ex->chunks.push_back(PartialImageEvent(event.preview, event.preview_index,
                                                   UnixSeconds(), ex->size, ex->output_format));
          }
          break;
        case GenerationEvent::Kind::kImage:
          ex->images[i] = FinishedImage{event.request_id, std::move(event)};
          break;
        case GenerationEvent::Kind::kDone:
          ex->statuses[i] = event.status;
          if (ex->stream) {
            ex->chunks.push_back(
                event.status.ok()
                    ? CompletedEvent(ex->images[i], UnixSeconds(), ex->size, ex->output_format,
                                     ex->method, ex->input_tokens)
                    : ErrorEvent(event.status, HttpStatusOf(event.status, false)));
          }
          --ex->remaining;
          break;
      }
      ex->cv.notify_all();
    });
    if (!call.ok()) {
      // Stop what already started; its events go nowhere.
      exchange->ClientGone();
      const bool queue_full = absl::IsUnavailable(call.status()) && service_->ready();
      return SendError(connection, call.status(), HttpStatusOf(call.status(), queue_full),
                       base_id);
    }
    if (i == 0) {
      std::lock_guard<std::mutex> lock(exchange->mu);
      exchange->method = (*call)->request().method;
    }
    exchange->AddCall(*std::move(call));
  }

  const MHD_ConnectionInfo* fd_info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  const int fd = fd_info != nullptr ? fd_info->connect_fd : -1;
  std::weak_ptr<Exchange> weak = exchange;
  const uint64_t watch = fd >= 0 ? hangups_.Watch(fd, [weak] {
    if (auto ex = weak.lock()) ex->ClientGone();
  })
                                 : 0;

  if (images.stream) {
    state->watch_id = watch;  // until the stream completes (OnCompleted)
    state->exchange = exchange;
    MHD_Response* response = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 64 * 1024, &HttpCallbacks::ReadStream, exchange.get(), nullptr);
    if (response == nullptr) return false;
    MHD_add_response_header(response, "Content-Type", "text/event-stream");
    MHD_add_response_header(response, "Cache-Control", "no-store");
    MHD_add_response_header(response, "X-Accel-Buffering", "no");  // proxies: do not buffer
    const MHD_Result queued = MHD_queue_response(connection, 200, response);
    MHD_destroy_response(response);
    return queued == MHD_YES;
  }

  {
    std::unique_lock<std::mutex> lock(exchange->mu);
    exchange->cv.wait(lock, [&] { return exchange->remaining == 0; });
  }
  if (watch != 0) hangups_.Unwatch(watch);
  std::lock_guard<std::mutex> lock(exchange->mu);
  if (exchange->client_gone) return false;  // nobody to answer: close the connection
  for (const absl::Status& status : exchange->statuses) {
    if (!status.ok()) return SendError(connection, status, HttpStatusOf(status, false), base_id);
  }
  return Send(connection, 200, kJson,
              ImagesResponseJson(UnixSeconds(), exchange->method, exchange->output_format,
                                 exchange->size, exchange->input_tokens, exchange->images),
              base_id);
}

}  // namespace mulo::server::http
