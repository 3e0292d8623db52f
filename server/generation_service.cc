#include "server/generation_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "mulo/v1/method_names.h"
#include "server/client_text.h"
#include "server/request_log.h"

namespace mulo::server {
namespace {

using Clock = GenerationService::Clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

ModelSummary Summarize(const std::string& name, const engine::ImageEngine& engine) {
  ModelSummary out;
  static_cast<engine::FamilyDescription&>(out) = engine.Describe();
  out.name = name;
  return out;
}

}  // namespace

void GenerationService::Call::ClientGone() {
  client_gone_ = true;
  job_->Cancel();
  if (scheduler_ != nullptr) scheduler_->SkipDeparted();
}

GenerationService::GenerationService(Scheduler& scheduler, ServerMetrics& metrics,
                                     BatchPolicy batching, RequestLimits limits)
    : scheduler_(scheduler), metrics_(metrics), batching_(std::move(batching)), limits_(limits) {}

void GenerationService::Finish(const Call& call, const absl::Status& status,
                               const JobRecord* record, const std::string& method) {
  RequestLogLine log;
  log.request_id = call.request_id_;
  log.model = call.model_;
  log.method = method;
  log.protocol = call.options_.protocol;
  log.user = call.options_.user;
  log.status = status;
  log.total_seconds = SecondsBetween(call.options_.arrived, Clock::now());
  if (record != nullptr) {
    log.tokens = record->tokens;
    if (record->started) log.queue_seconds = SecondsBetween(record->enqueued, *record->started);
    if (record->first_row) {
      log.first_row_seconds = SecondsBetween(call.options_.arrived, *record->first_row);
    }
    log.stats = record->stats;
  }
  metrics_.RecordRequest(log);
  if (status.ok() && record != nullptr) {
    live_.Record({method, log.stats.tokens, log.stats.target_forward_passes,
                  log.stats.accepted_tokens, log.stats.verify_steps});
  }
  WriteRequestLog(log);
}

LiveFigures::Snapshot GenerationService::Live() const {
  LiveFigures::Snapshot out = live_.Read();
  out.running = scheduler_.running();
  out.queued = scheduler_.queue_depth();
  return out;
}

void GenerationService::RecordRefused(const std::string& request_id, const std::string& model,
                                      const CallOptions& options, const absl::Status& status) {
  Call call;
  call.request_id_ = request_id.empty() ? absl::StrCat("req-", next_id_.fetch_add(1)) : request_id;
  call.model_ = model;
  call.options_ = options;
  Finish(call, status, nullptr, "");
}

absl::StatusOr<std::shared_ptr<GenerationService::Call>> GenerationService::Start(
    const v1::GenerateRequest& request, CallOptions options, GenerationListener listener) {
  auto call = std::make_shared<Call>();
  // Client text as sent: the log line bounds and escapes it, metrics label loaded names only.
  call->request_id_ = request.request_id().empty() ? absl::StrCat("req-", next_id_.fetch_add(1))
                                                   : request.request_id();
  call->model_ = request.model();
  call->options_ = std::move(options);
  call->listener_ = std::move(listener);
  auto refuse = [&](const absl::Status& status, const std::string& method) {
    Finish(*call, status, nullptr, method);
    return status;
  };

  if (!accepting_) {
    return refuse(absl::UnavailableError("server is draining; retry on another replica"), "");
  }
  const ModelRepository* repository = repository_;
  if (repository == nullptr) {
    return refuse(absl::UnavailableError("models are still loading; retry shortly"), "");
  }
  // A request that names no method takes the server's default (--default_method); one that
  // names a model alias (--model_aliases) the family it stands for.
  v1::GenerateRequest with_default;
  const bool defaulted =
      request.GetReflection()->GetOneofFieldDescriptor(request, &v1::MethodOneof()) == nullptr &&
      default_method_ != engine::kBaselineMethod;
  const auto alias = aliases_.find(request.model());
  if (defaulted || alias != aliases_.end()) {
    with_default = request;
    if (defaulted) {
      with_default.GetReflection()->MutableMessage(&with_default,
                                                   v1::ApiMethodField(default_method_));
    }
    if (alias != aliases_.end()) with_default.set_model(alias->second);
  }
  const bool rewritten = defaulted || alias != aliases_.end();
  if (alias != aliases_.end()) call->model_ = alias->second;  // logged and counted as the family
  auto validated = ValidateRequest(rewritten ? with_default : request, *repository);
  if (!validated.ok()) return refuse(validated.status(), "");
  if (absl::Status bounded = CheckRequestLimits(*validated, limits_); !bounded.ok()) {
    return refuse(bounded, "");
  }
  validated->request_id = call->request_id_;
  const std::string method = validated->plan.method;

  // The call's deadline bounds queueing and decoding alike.
  const bool has_deadline = call->options_.deadline.has_value();
  const auto deadline = call->options_.deadline.value_or(Clock::now());
  const bool joins_batches = batching_.Batches(method);
  // The job reaches its call through a weak pointer: the call owns the job, and the service
  // owns the call until the done event.
  std::weak_ptr<Call> weak_call = call;
  call->job_ = std::make_shared<GenerationJob>(*std::move(validated), deadline, has_deadline,
                                               joins_batches, limits_.max_decode_time,
                                               [this, weak_call](GenerationEvent event) {
                                                 if (auto c = weak_call.lock())
                                                   OnJobEvent(c, std::move(event));
                                               });
  call->scheduler_ = &scheduler_;
  {
    // In the set before the job can run, so that its done event finds it.
    std::lock_guard<std::mutex> lock(calls_mu_);
    calls_.insert(call);
  }
  if (absl::Status queued = scheduler_.Submit(call->job_); !queued.ok()) {
    {
      std::lock_guard<std::mutex> lock(calls_mu_);
      calls_.erase(call);
    }
    return refuse(queued, method);
  }
  return call;
}

void GenerationService::OnJobEvent(const std::shared_ptr<Call>& call, GenerationEvent event) {
  event.request_id = call->request_id_;
  if (event.kind != GenerationEvent::Kind::kDone) {
    call->listener_(std::move(event));
    return;
  }
  absl::Status outcome = event.status;
  const bool client_gone = call->client_gone_;
  if (client_gone && outcome.ok()) outcome = absl::CancelledError("client went away");
  // A transport may cancel the call when the client's deadline passes, before the decoder's
  // own deadline check does: report such a cancellation as what it is. gRPC's deadline timer
  // and this clock's copy of the deadline (converted from the system clock) differ by a few
  // milliseconds, so a cancellation within kDeadlineSlack of the deadline counts as it.
  constexpr auto kDeadlineSlack = std::chrono::milliseconds(20);
  if (absl::IsCancelled(outcome) && call->options_.deadline &&
      Clock::now() + kDeadlineSlack >= *call->options_.deadline) {
    outcome = absl::DeadlineExceededError("deadline exceeded");
  }
  // Stopped by the drain timeout, not by the client: a retryable code, so a balancer or the
  // client's retry policy sends it to another replica instead of reporting a failure.
  if (absl::IsCancelled(outcome) && shut_down_ && !client_gone) {
    outcome = absl::UnavailableError(
        "server shut down (drain timeout) before the request finished; retry on another replica");
  }
  const JobRecord record = call->job_->record();
  Finish(*call, outcome, &record, call->job_->request().plan.method);
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    calls_.erase(call);
  }
  event.status = outcome;
  call->listener_(std::move(event));
}

void GenerationService::CancelAll() {
  shut_down_ = true;
  std::lock_guard<std::mutex> lock(calls_mu_);
  for (const auto& call : calls_) call->job_->Cancel();
}

absl::StatusOr<std::vector<ModelSummary>> GenerationService::ListModels() const {
  const ModelRepository* repository = repository_;
  if (repository == nullptr) return absl::UnavailableError("models are still loading");
  std::vector<ModelSummary> out;
  for (const auto& name : repository->Names())
    out.push_back(Summarize(name, *repository->Find(name)));
  return out;
}

std::string GenerationService::DefaultModel() const {
  if (!default_model_.empty()) return default_model_;
  const ModelRepository* repository = repository_;
  if (repository == nullptr) return "";
  const std::vector<std::string> names = repository->Names();
  return names.empty() ? "" : names.front();
}

absl::StatusOr<ModelSummary> GenerationService::GetModel(const std::string& asked,
                                                         const std::string& field) const {
  const auto alias = aliases_.find(asked);
  const std::string& name = alias != aliases_.end() ? alias->second : asked;
  const ModelRepository* repository = repository_;
  if (repository == nullptr) return absl::UnavailableError("models are still loading");
  const engine::ImageEngine* models = repository->Find(name);
  if (models == nullptr && !repository->FailureOf(name).empty()) {
    return absl::UnavailableError(absl::StrCat(field, ": model ", Quoted(name),
                                               " did not load: ", repository->FailureOf(name)));
  }
  if (models == nullptr) {
    return absl::NotFoundError(absl::StrCat(field, ": model ", Quoted(name), " is not loaded"));
  }
  return Summarize(name, *models);
}

}  // namespace mulo::server
