#include "server/image_generation_service.h"

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

#include "server/proto_conversions.h"

namespace mulo::server {
namespace {

// One Generate call. Events arrive on worker threads and queue here; one write is in flight
// at a time (gRPC's rule), the next starts from OnWriteDone, and the status follows the last.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  GenerateReactor(GenerationService& generation, grpc::CallbackServerContext* context,
                  const v1::GenerateRequest& request, const absl::Status& authorized) {
    GenerationService::CallOptions options;
    options.protocol = "grpc";
    if (!authorized.ok()) {
      generation.RecordRefused(request.request_id(), request.model(), options, authorized);
      finished_ = true;
      Finish(ToGrpc(authorized));
      return;
    }
    const auto system_deadline = context->deadline();
    if (system_deadline != std::chrono::system_clock::time_point::max()) {
      options.deadline = GenerationService::Clock::now() +
                         std::chrono::duration_cast<GenerationService::Clock::duration>(
                             system_deadline - std::chrono::system_clock::now());
    }
    // The listener may run before Start returns (a fast job): it only touches what the lock
    // guards, and the call is recorded below under the same lock.
    auto call = generation.Start(request, std::move(options),
                                 [this](GenerationEvent event) { OnEvent(std::move(event)); });
    std::lock_guard<std::mutex> lock(mu_);
    if (!call.ok()) {
      finished_ = true;
      Finish(ToGrpc(call.status()));
      return;
    }
    call_ = *std::move(call);
    if (client_gone_) call_->ClientGone();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) ClientGoneLocked();  // the stream broke: stop decoding, drop what is queued
    PumpLocked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    ClientGoneLocked();
  }

  void OnDone() override { delete this; }

 private:
  void OnEvent(GenerationEvent event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.kind == GenerationEvent::Kind::kDone) {
      done_ = true;
      status_ = event.status;
    } else if (!client_gone_) {
      if (auto response = ToGenerateResponse(event)) pending_.push_back(*std::move(response));
    }
    PumpLocked();
  }

  void ClientGoneLocked() {
    client_gone_ = true;
    pending_.clear();
    if (call_ != nullptr) call_->ClientGone();
  }

  void PumpLocked() {
    if (writing_ || finished_) return;
    if (!pending_.empty()) {
      current_ = std::move(pending_.front());
      pending_.pop_front();
      writing_ = true;
      StartWrite(&current_);
      return;
    }
    if (done_) {
      finished_ = true;
      Finish(ToGrpc(status_));
    }
  }

  std::mutex mu_;
  std::shared_ptr<GenerationService::Call> call_;
  std::deque<v1::GenerateResponse> pending_;
  v1::GenerateResponse current_;  // the message being written
  bool writing_ = false;
  bool done_ = false;  // the done event arrived
  bool finished_ = false;
  bool client_gone_ = false;
  absl::Status status_;
};

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* ImageGenerationService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  return new GenerateReactor(generation_, context, *request, Authorize(*context));
}

absl::Status ImageGenerationService::Authorize(const grpc::CallbackServerContext& context) const {
  if (api_keys_ == nullptr || !api_keys_->enabled()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  return api_keys_->Authorize(it == metadata.end()
                                  ? absl::string_view()
                                  : absl::string_view(it->second.data(), it->second.size()));
}

grpc::ServerUnaryReactor* ImageGenerationService::ListModels(grpc::CallbackServerContext* context,
                                                             const v1::ListModelsRequest*,
                                                             v1::ListModelsResponse* response) {
  auto* reactor = context->DefaultReactor();
  if (absl::Status authorized = Authorize(*context); !authorized.ok()) {
    reactor->Finish(ToGrpc(authorized));
    return reactor;
  }
  auto models = generation_.ListModels();
  if (!models.ok()) {
    reactor->Finish(ToGrpc(models.status()));
    return reactor;
  }
  for (const auto& model : *models) FillModelInfo(model, response->add_models());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ImageGenerationService::GetModel(grpc::CallbackServerContext* context,
                                                           const v1::GetModelRequest* request,
                                                           v1::ModelInfo* response) {
  auto* reactor = context->DefaultReactor();
  if (absl::Status authorized = Authorize(*context); !authorized.ok()) {
    reactor->Finish(ToGrpc(authorized));
    return reactor;
  }
  auto model = generation_.GetModel(request->name());
  if (!model.ok()) {
    reactor->Finish(ToGrpc(model.status()));
    return reactor;
  }
  FillModelInfo(*model, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace mulo::server
