// The gRPC edge's conversions between the generation service's plain types and the wire's
// messages (mulo.v1): events to GenerateResponse, model summaries to ModelInfo, statuses.
#ifndef MULO_SERVER_PROTO_CONVERSIONS_H_
#define MULO_SERVER_PROTO_CONVERSIONS_H_

#include <grpcpp/grpcpp.h>

#include <optional>

#include "absl/status/status.h"
#include "mulo/v1/image_generation.pb.h"
#include "server/generation_event.h"
#include "server/generation_service.h"

namespace mulo::server {

// A rows or image event as the stream's message; nullopt for the done event (the RPC's status).
std::optional<v1::GenerateResponse> ToGenerateResponse(const GenerationEvent& event);

void FillStats(const engine::Stats& stats, double queue_seconds, v1::Stats* out);

void FillModelInfo(const ModelSummary& model, v1::ModelInfo* info);

// absl::Status <-> grpc::Status (same code numbers).
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace mulo::server

#endif  // MULO_SERVER_PROTO_CONVERSIONS_H_
