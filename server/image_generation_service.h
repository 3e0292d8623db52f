// The mulo.v1.ImageGeneration gRPC service: a thin adapter over the GenerationService (gRPC's
// callback API). Generate starts a generation and writes its events to the stream as they
// come (each event wakes the call's reactor: nothing polls); the client cancelling, its
// deadline passing or its stream breaking stops the generation within one decoding step.
#ifndef MULO_SERVER_IMAGE_GENERATION_SERVICE_H_
#define MULO_SERVER_IMAGE_GENERATION_SERVICE_H_

#include "mulo/v1/image_generation.grpc.pb.h"
#include "server/api_keys.h"
#include "server/generation_service.h"

namespace mulo::server {

class ImageGenerationService final : public v1::ImageGeneration::CallbackService {
 public:
  // `generation` and `api_keys` (null: no keys) must outlive the service. With keys, every
  // mulo.v1 call must carry `authorization: Bearer <key>` metadata (UNAUTHENTICATED otherwise);
  // health and reflection stay open.
  explicit ImageGenerationService(GenerationService& generation,
                                  const ApiKeys* api_keys = nullptr)
      : generation_(generation), api_keys_(api_keys) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* context,
                                     const v1::GetModelRequest* request,
                                     v1::ModelInfo* response) override;

 private:
  absl::Status Authorize(const grpc::CallbackServerContext& context) const;

  GenerationService& generation_;
  const ApiKeys* const api_keys_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_IMAGE_GENERATION_SERVICE_H_
