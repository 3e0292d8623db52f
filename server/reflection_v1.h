// gRPC server reflection under its v1 name. Debian's gRPC (1.51) implements only
// grpc.reflection.v1alpha.ServerReflection; newer grpcurl, Postman and grpcui ask for
// grpc.reflection.v1.ServerReflection first. The two versions' messages are the same on the
// wire (v1 only renamed the package), so this generic service relays each v1 stream, byte
// for byte, to the server's own v1alpha service over an in-process channel: v1 answers
// exactly what v1alpha answers, with no second implementation to keep in step.
// Every other unregistered method gets UNIMPLEMENTED, as without a generic service.
#ifndef MULO_SERVER_REFLECTION_V1_H_
#define MULO_SERVER_REFLECTION_V1_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace mulo::server {

inline constexpr char kReflectionV1Method[] =
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
inline constexpr char kReflectionV1AlphaMethod[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

class ReflectionV1Relay : public grpc::CallbackGenericService {
 public:
  // The server's own channel (grpc::Server::InProcessChannel), once it is started; until then
  // v1 calls get UNAVAILABLE.
  void SetChannel(std::shared_ptr<grpc::Channel> channel);

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override;

 private:
  absl::Mutex mu_;
  std::shared_ptr<grpc::Channel> channel_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mulo::server

#endif  // MULO_SERVER_REFLECTION_V1_H_
