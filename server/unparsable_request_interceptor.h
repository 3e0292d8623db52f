// Requests whose bytes do not parse as their message (random bytes, a truncated varint, invalid
// UTF-8 in `prompt`, a packed `condition` whose length is not a multiple of 4) never reach
// the service: gRPC fails them while deserializing, with an empty message and nothing counted
// (INTERNAL from synchronous handlers, UNIMPLEMENTED from callback ones). This interceptor sees that the handler got no
// request message and turns the status into INVALID_ARGUMENT with a message, and reports the
// call so it is counted like every other refused request.
#ifndef MULO_SERVER_UNPARSABLE_REQUEST_INTERCEPTOR_H_
#define MULO_SERVER_UNPARSABLE_REQUEST_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <functional>
#include <string>

namespace mulo::server {

// Installed with ServerBuilder::experimental().SetInterceptorCreators; it intercepts the
// methods of services whose full name starts with `service_prefix` ("/mulo.v1.").
class UnparsableRequestInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `on_unparsable` is called with the full method name ("/mulo.v1.ImageGeneration/Generate")
  // and the status sent, on gRPC's threads.
  using Report = std::function<void(const std::string& method, const grpc::Status& status)>;

  UnparsableRequestInterceptorFactory(std::string service_prefix, Report on_unparsable);

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const std::string service_prefix_;
  const Report on_unparsable_;
};

// "request: the bytes are not a valid mulo.v1.GenerateRequest ..." for
// "/mulo.v1.ImageGeneration/Generate".
std::string UnparsableRequestMessage(const std::string& method);
// The same for a message type by its full name ("grpc.reflection.v1.ServerReflectionRequest").
std::string UnparsableMessageText(const std::string& message_type);

}  // namespace mulo::server

#endif  // MULO_SERVER_UNPARSABLE_REQUEST_INTERCEPTOR_H_
