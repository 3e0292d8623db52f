// The gRPC front end: one grpc::Server exposing mulo.v1.ImageGeneration, grpc.health.v1 (for
// "" and the service's name), server reflection v1alpha (gRPC's) and v1 (ours), with the
// interceptor that turns unparsable requests into INVALID_ARGUMENT. mulo_server and the
// whole-surface fuzzer build the server the same way through this class.
#ifndef MULO_SERVER_GRPC_FRONT_END_H_
#define MULO_SERVER_GRPC_FRONT_END_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/image_generation_service.h"
#include "server/reflection_v1_service.h"
#include "server/unparsable_request_interceptor.h"

namespace mulo::server {

struct GrpcFrontEndOptions {
  std::string address = "0.0.0.0:8001";  // host:port; port 0 picks a free one
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  int max_message_bytes = 64 * 1024 * 1024;  // received and sent
  // Called for each mulo.v1 request whose bytes do not parse (may be empty).
  UnparsableRequestInterceptorFactory::Report on_unparsable;
};

class GrpcFrontEnd {
 public:
  // Listens and serves `service` (which must outlive the front end); health starts
  // NOT_SERVING. An error when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<GrpcFrontEnd>> Start(const GrpcFrontEndOptions& options,
                                                             ImageGenerationService* service);
  // Shuts down with no grace if Shutdown was not called.
  ~GrpcFrontEnd();

  int port() const { return port_; }
  // Health for the whole server and for mulo.v1.ImageGeneration.
  void SetServing(bool serving);
  // Drain: health NOT_SERVING for every name, sent once to each watcher, and no later change.
  void StopServing();
  // Stops accepting calls, waits up to `grace` for those in flight to end, cancels the rest
  // and waits for them.
  void Shutdown(absl::Duration grace);

  const ReflectionV1Service& reflection_v1() const { return reflection_v1_; }

 private:
  GrpcFrontEnd();

  ReflectionV1Service reflection_v1_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_GRPC_FRONT_END_H_
