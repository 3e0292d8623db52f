#include "server/image_generation_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/decode/method_registry.h"
#include "server/client_text.h"
#include "server/generation_job.h"
#include "server/request_log.h"

namespace mulo::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void FillModelInfo(const std::string& name, const engine::ModelSet& models, v1::ModelInfo* info) {
  info->set_name(name);
  info->set_image_width(static_cast<uint32_t>(models.ImageSize()));
  info->set_image_height(static_cast<uint32_t>(models.ImageSize()));
  info->set_grid_size(static_cast<uint32_t>(models.target->config().grid_size));
  info->set_vocab_size(static_cast<uint32_t>(models.target->config().vocab_size));
  for (const auto& m : engine::AvailableMethods(models)) info->add_methods(m);
  info->mutable_default_sampling()->set_cfg_scale(models.default_cfg_scale);
  info->mutable_default_sampling()->set_temperature(1.0);
  info->mutable_default_sampling()->set_top_p(1.0);
  const auto& target = models.target->config();
  if (models.conditioner != nullptr) info->add_conditions("prompt");
  if (target.condition_mode != engine::ConditionMode::kClassLabel) {
    info->add_conditions("condition");
    info->set_condition_width(static_cast<uint32_t>(target.cond_dim));
  } else {
    info->add_conditions("class_label");
    info->set_num_classes(static_cast<uint32_t>(target.num_classes));
  }
  if (models.ta_tok != nullptr) info->add_conditions("condition_tokens");
  info->set_condition_rows(static_cast<uint32_t>(target.cls_token_num));
}

}  // namespace

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

ImageGenerationService::ImageGenerationService(Scheduler& scheduler, ServerMetrics& metrics,
                                               BatchPolicy batching, RequestLimits limits)
    : scheduler_(scheduler),
      metrics_(metrics),
      batching_(std::move(batching)),
      limits_(limits) {}

grpc::Status ImageGenerationService::Generate(grpc::ServerContext* context,
                                              const v1::GenerateRequest* request,
                                              grpc::ServerWriter<v1::GenerateResponse>* writer) {
  const auto arrived = Clock::now();
  RequestLogLine log;
  // Client text as sent: the log line bounds and escapes it, metrics label loaded names only.
  log.request_id = request->request_id().empty()
                       ? absl::StrCat("req-", next_id_.fetch_add(1))
                       : request->request_id();
  log.model = request->model();
  auto finish = [&](const absl::Status& status, const JobRecord* record) {
    log.status = status;
    log.total_seconds = SecondsBetween(arrived, Clock::now());
    if (record != nullptr) {
      log.tokens = record->tokens;
      if (record->started) log.queue_seconds = SecondsBetween(record->enqueued, *record->started);
      if (record->first_row) log.first_row_seconds = SecondsBetween(arrived, *record->first_row);
      log.stats = record->stats;
    }
    metrics_.RecordRequest(log);
    WriteRequestLog(log);
    return ToGrpc(status);
  };

  if (!accepting_) {
    return finish(absl::UnavailableError("server is draining; retry on another replica"), nullptr);
  }
  const ModelRepository* repository = repository_;
  if (repository == nullptr) {
    return finish(absl::UnavailableError("models are still loading; retry shortly"), nullptr);
  }
  auto validated = ValidateRequest(*request, *repository);
  if (!validated.ok()) return finish(validated.status(), nullptr);
  if (absl::Status bounded = CheckRequestLimits(*validated, limits_); !bounded.ok()) {
    return finish(bounded, nullptr);
  }
  validated->request_id = log.request_id;
  log.method = validated->method;

  // The client's deadline bounds queueing and decoding alike.
  const auto system_deadline = context->deadline();
  const bool has_deadline = system_deadline != std::chrono::system_clock::time_point::max();
  auto deadline = Clock::now();
  if (has_deadline) {
    deadline += std::chrono::duration_cast<Clock::duration>(system_deadline -
                                                            std::chrono::system_clock::now());
  }
  const bool joins_batches = batching_.Batches(validated->method);
  auto job = std::make_shared<GenerationJob>(*std::move(validated), deadline, has_deadline,
                                             joins_batches, limits_.max_decode_time);
  if (absl::Status queued = scheduler_.Submit(job); !queued.ok()) {
    return finish(queued, nullptr);
  }
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_.insert(job);
  }
  absl::Status outcome;
  bool stream_broken = false;
  while (true) {
    if (context->IsCancelled()) job->Cancel();  // stops within one decoding step
    auto event = job->NextEvent(absl::Milliseconds(20));
    if (!event) continue;
    if (event->response && !stream_broken) {
      if (!writer->Write(*event->response)) {
        stream_broken = true;  // the client is gone: stop decoding, keep draining events
        job->Cancel();
      }
    }
    if (event->done) {
      outcome = event->status;
      break;
    }
  }
  if (stream_broken && outcome.ok()) outcome = absl::CancelledError("client went away");
  // gRPC cancels the call when the client's deadline passes, which may reach the decoder
  // before its own deadline check does: report such a cancellation as what it is.
  if (absl::IsCancelled(outcome) && has_deadline && Clock::now() >= deadline) {
    outcome = absl::DeadlineExceededError("deadline exceeded");
  }
  if (context->IsCancelled() && outcome.ok()) outcome = absl::CancelledError("request cancelled");
  // Stopped by the drain timeout, not by the client: a retryable code, so a balancer or the
  // client's retry policy sends it to another replica instead of reporting a failure.
  if (absl::IsCancelled(outcome) && shut_down_ && !context->IsCancelled()) {
    outcome = absl::UnavailableError(
        "server shut down (drain timeout) before the request finished; retry on another replica");
  }
  const JobRecord record = job->record();
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_.erase(job);
  }
  job.reset();  // the request's buffers go now, not when the RPC object is recycled
  return finish(outcome, &record);
}

void ImageGenerationService::CancelAll() {
  shut_down_ = true;
  std::lock_guard<std::mutex> lock(jobs_mu_);
  for (const auto& job : jobs_) job->Cancel();
}

grpc::Status ImageGenerationService::ListModels(grpc::ServerContext*,
                                                const v1::ListModelsRequest*,
                                                v1::ListModelsResponse* response) {
  const ModelRepository* repository = repository_;
  if (repository == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "models are still loading");
  }
  for (const auto& name : repository->Names()) {
    FillModelInfo(name, *repository->Find(name), response->add_models());
  }
  return grpc::Status::OK;
}

grpc::Status ImageGenerationService::GetModel(grpc::ServerContext*,
                                              const v1::GetModelRequest* request,
                                              v1::ModelInfo* response) {
  const ModelRepository* repository = repository_;
  if (repository == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "models are still loading");
  }
  const engine::ModelSet* models = repository->Find(request->name());
  if (models == nullptr) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("name: model ", Quoted(request->name()), " is not loaded"));
  }
  FillModelInfo(request->name(), *models, response);
  return grpc::Status::OK;
}

}  // namespace mulo::server
