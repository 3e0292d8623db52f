#include "server/grpc_front_end.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mulo::server {
namespace {

constexpr char kHealthService[] = "grpc.health.v1.Health";

std::chrono::system_clock::time_point After(absl::Duration grace) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             absl::ToChronoNanoseconds(grace));
}

}  // namespace

// What reflection lists: every service this front end registers, in gRPC's order for the
// v1alpha list (the registered services, then the ones its plugins add), then v1.
GrpcFrontEnd::GrpcFrontEnd()
    : reflection_v1_({v1::ImageGeneration::service_full_name(), kReflectionV1AlphaService,
                      kHealthService, kReflectionV1Service}) {}

absl::StatusOr<std::unique_ptr<GrpcFrontEnd>> GrpcFrontEnd::Start(
    const GrpcFrontEndOptions& options, ImageGenerationService* service) {
  std::unique_ptr<GrpcFrontEnd> front_end(new GrpcFrontEnd());
  // Both are process-wide switches read by the builder below.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, options.credentials, &front_end->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(service);
  builder.RegisterCallbackGenericService(&front_end->reflection_v1_);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(
      std::make_unique<UnparsableRequestInterceptorFactory>("/mulo.v1.", options.on_unparsable));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  front_end->server_ = builder.BuildAndStart();
  if (front_end->server_ == nullptr || front_end->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address));
  }
  front_end->SetServing(false);
  return front_end;
}

GrpcFrontEnd::~GrpcFrontEnd() {
  if (server_ != nullptr) Shutdown(absl::ZeroDuration());
}

void GrpcFrontEnd::SetServing(bool serving) {
  if (server_ == nullptr) return;
  auto* health = server_->GetHealthCheckService();
  health->SetServingStatus(serving);
  health->SetServingStatus(v1::ImageGeneration::service_full_name(), serving);
}

void GrpcFrontEnd::StopServing() {
  if (server_ == nullptr) return;
  // Shutdown sets every name NOT_SERVING once and ignores later changes; gRPC's own
  // Server::Shutdown calls it again, which then does nothing (a SetServing(false) first would
  // make watchers see NOT_SERVING twice).
  server_->GetHealthCheckService()->Shutdown();
}

void GrpcFrontEnd::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(After(grace));
  server_->Wait();
  server_.reset();
}

}  // namespace mulo::server
