// The generation service: what every front end (gRPC, HTTP) reaches, knowing nothing of any
// transport. A request comes in as the wire's GenerateRequest (the one request schema: HTTP's
// JSON is converted to it, so both share one validation) with the call's deadline; the service
// validates it, applies the server's limits, queues it on the scheduler and hands its events
// (rows, previews, the image, the end) to the caller's listener. It owns, once for all front
// ends: refusal while loading or draining, deadlines, cancellation, the drain timeout's
// cancellation, the request log line and the request metrics.
#ifndef MULO_SERVER_GENERATION_SERVICE_H_
#define MULO_SERVER_GENERATION_SERVICE_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/api/image_engine.h"
#include "engine/decode/baseline_method.h"
#include "mulo/v1/image_generation.pb.h"
#include "server/batch_policy.h"
#include "server/generation_event.h"
#include "server/generation_job.h"
#include "server/live_figures.h"
#include "server/model_repository.h"
#include "server/request_limits.h"
#include "server/scheduler.h"
#include "server/server_metrics.h"

namespace mulo::server {

// What a front end may say about a loaded model family (gRPC's ModelInfo, HTTP's /v1/models):
// the engine's description of it, under the name it is served as.
struct ModelSummary : engine::FamilyDescription {
  std::string name;
  double default_temperature = 1.0;
  double default_top_p = 1.0;
};

class GenerationService {
 public:
  using Clock = std::chrono::steady_clock;

  struct CallOptions {
    std::string protocol = "grpc";  // the requests metric's protocol label and the log's
    std::string user;               // logged (HTTP's `user`)
    std::optional<Clock::time_point> deadline;  // none: the call has no deadline
    Clock::time_point arrived = Clock::now();
  };

  // One started generation.
  class Call {
   public:
    // The client is gone (disconnected, or its stream broke): stop within one decoding step,
    // or, still queued, leave the queue at once (its slot frees for the next call); the
    // request ends CANCELLED (DEADLINE_EXCEEDED when its deadline had passed).
    void ClientGone();
    const std::string& request_id() const { return request_id_; }
    const ValidatedRequest& request() const { return job_->request(); }

   private:
    friend class GenerationService;
    std::string request_id_;
    std::string model_;
    CallOptions options_;
    GenerationListener listener_;
    std::shared_ptr<GenerationJob> job_;
    Scheduler* scheduler_ = nullptr;
    std::atomic<bool> client_gone_{false};
  };

  // Requests are refused with UNAVAILABLE until SetRepository is called (models loading).
  // `batching` picks the methods whose requests join their worker's batches.
  GenerationService(Scheduler& scheduler, ServerMetrics& metrics,
                    BatchPolicy batching = BatchPolicy::All(), RequestLimits limits = {});

  // The loaded models; must outlive the service.
  void SetRepository(const ModelRepository* repository) { repository_ = repository; }
  // The method of requests that name none (a method of the API; the baseline unless set).
  void SetDefaultMethod(std::string method) { default_method_ = std::move(method); }
  // The family of HTTP requests that name none (OpenAI's clients may omit `model`): this one,
  // or, unset, the first loaded family in name order.
  void SetDefaultModel(std::string model) { default_model_ = std::move(model); }
  std::string DefaultModel() const;
  // Other names for loaded families (--model_aliases: "dall-e-3=synth"), for clients that send
  // a model name of their own; a request naming an alias runs the family.
  void SetModelAliases(std::map<std::string, std::string> aliases) {
    aliases_ = std::move(aliases);
  }

  // Validates and queues `request`. On success its events go to `listener`, ending with one
  // kDone event whose status is the request's outcome (logged and counted by then). A refusal
  // (loading, draining, invalid, over a limit, queue full) is returned here, logged and
  // counted, and the listener is never called.
  absl::StatusOr<std::shared_ptr<Call>> Start(const v1::GenerateRequest& request,
                                              CallOptions options, GenerationListener listener);

  // A request its front end refused before it became a GenerateRequest (unparsable bytes or
  // JSON, a body too large, a missing key): logged and counted like every other refusal.
  void RecordRefused(const std::string& request_id, const std::string& model,
                     const CallOptions& options, const absl::Status& status);

  // The loaded families, by name; UNAVAILABLE while loading.
  absl::StatusOr<std::vector<ModelSummary>> ListModels() const;
  // NOT_FOUND naming `field` when no family of that name is loaded.
  absl::StatusOr<ModelSummary> GetModel(const std::string& name,
                                        const std::string& field = "name") const;

  // The playground's live panel: requests running and queued now, and what the images finished
  // over the last minutes say (live_figures.h).
  LiveFigures::Snapshot Live() const;

  // Drain: from now on new requests get UNAVAILABLE.
  void StopAccepting() { accepting_ = false; }
  bool accepting() const { return accepting_; }
  bool ready() const { return accepting_ && repository_ != nullptr; }
  // Drain timeout: stops every request in flight within one decoding step; each ends
  // UNAVAILABLE (retryable), never CANCELLED.
  void CancelAll();

 private:
  void OnJobEvent(const std::shared_ptr<Call>& call, GenerationEvent event);
  void Finish(const Call& call, const absl::Status& status, const JobRecord* record,
              const std::string& method);

  std::atomic<const ModelRepository*> repository_{nullptr};
  Scheduler& scheduler_;
  ServerMetrics& metrics_;
  const BatchPolicy batching_;
  const RequestLimits limits_;
  std::string default_method_ = engine::kBaselineMethod;
  std::string default_model_;
  std::map<std::string, std::string> aliases_;
  std::atomic<bool> accepting_{true};
  std::atomic<bool> shut_down_{false};  // CancelAll ran
  std::mutex calls_mu_;
  std::set<std::shared_ptr<Call>> calls_;  // in flight
  std::atomic<uint64_t> next_id_{1};
  LiveFigures live_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_GENERATION_SERVICE_H_
