// The mulo.v1.ImageGeneration gRPC service: a thin adapter over the GenerationService (gRPC's
// callback API). Generate starts a generation and writes its events to the stream as they
// come (each event wakes the call's reactor: nothing polls); the client cancelling, its
// deadline passing or its stream breaking stops the generation within one decoding step.
#ifndef MULO_SERVER_IMAGE_GENERATION_SERVICE_H_
#define MULO_SERVER_IMAGE_GENERATION_SERVICE_H_

#include "mulo/v1/image_generation.grpc.pb.h"
#include "server/generation_service.h"

namespace mulo::server {

class ImageGenerationService final : public v1::ImageGeneration::CallbackService {
 public:
  // `generation` must outlive the service.
  explicit ImageGenerationService(GenerationService& generation) : generation_(generation) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* context,
                                     const v1::GetModelRequest* request,
                                     v1::ModelInfo* response) override;

 private:
  GenerationService& generation_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_IMAGE_GENERATION_SERVICE_H_
