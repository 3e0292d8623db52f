// The mulo.v1.ImageGeneration gRPC service (synchronous API): validates each request, queues
// it on the scheduler and relays its events to the stream. One log line and one set of metric
// updates per request, whatever its outcome.
#ifndef MULO_SERVER_IMAGE_GENERATION_SERVICE_H_
#define MULO_SERVER_IMAGE_GENERATION_SERVICE_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "engine/decode/decoding_method.h"
#include "mulo/v1/image_generation.grpc.pb.h"
#include "server/batch_policy.h"
#include "server/generation_job.h"
#include "server/model_repository.h"
#include "server/request_limits.h"
#include "server/scheduler.h"
#include "server/server_metrics.h"

namespace mulo::server {

class ImageGenerationService final : public v1::ImageGeneration::Service {
 public:
  // Requests are refused with UNAVAILABLE until SetRepository is called (models loading).
  // `batching` picks the methods whose requests join their worker's batches.
  ImageGenerationService(Scheduler& scheduler, ServerMetrics& metrics,
                         BatchPolicy batching = BatchPolicy::All(), RequestLimits limits = {});

  // The loaded models; must outlive the service.
  void SetRepository(const ModelRepository* repository) { repository_ = repository; }

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status GetModel(grpc::ServerContext* context, const v1::GetModelRequest* request,
                        v1::ModelInfo* response) override;

  // Drain: from now on new requests get UNAVAILABLE.
  void StopAccepting() { accepting_ = false; }
  // Drain timeout: stops every request in flight within one decoding step; each ends
  // UNAVAILABLE (retryable), never CANCELLED.
  void CancelAll();

 private:
  std::atomic<const ModelRepository*> repository_{nullptr};
  Scheduler& scheduler_;
  ServerMetrics& metrics_;
  const BatchPolicy batching_;
  const RequestLimits limits_;
  std::atomic<bool> accepting_{true};
  std::atomic<bool> shut_down_{false};  // CancelAll ran
  std::mutex jobs_mu_;
  std::set<std::shared_ptr<GenerationJob>> jobs_;  // in flight
  std::atomic<uint64_t> next_id_{1};
};

// absl::Status <-> grpc::Status (same code numbers).
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace mulo::server

#endif  // MULO_SERVER_IMAGE_GENERATION_SERVICE_H_
