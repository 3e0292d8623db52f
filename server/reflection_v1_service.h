// gRPC server reflection under its v1 name. Debian's gRPC (1.51) implements only
// grpc.reflection.v1alpha.ServerReflection; newer grpcurl, Postman and grpcui ask for
// grpc.reflection.v1.ServerReflection first. This generic callback service answers v1 itself,
// from the same descriptor pool v1alpha reads (server/reflection_answers.h), one request at a
// time: read, answer, write, read again. With one operation in flight and Finish called only
// when none is, no interleaving of client half-close, cancel, deadline or server shutdown can
// find the stream mid-operation. A message that does not parse ends the stream with
// INVALID_ARGUMENT and a message (v1alpha's synchronous handler cannot tell it from a
// half-close). Every other method that reaches the generic service gets UNIMPLEMENTED, as
// without one.
//
// (Until issue 38 this was a relay to the server's own v1alpha over an in-process channel; a
// malformed message while the relayed exchange was in flight made it start an operation on a
// finished call, and gRPC aborted the process.)
#ifndef MULO_SERVER_REFLECTION_V1_SERVICE_H_
#define MULO_SERVER_REFLECTION_V1_SERVICE_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <string>
#include <vector>

namespace mulo::server {

inline constexpr char kReflectionV1Service[] = "grpc.reflection.v1.ServerReflection";
inline constexpr char kReflectionV1Method[] =
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
inline constexpr char kReflectionV1AlphaService[] = "grpc.reflection.v1alpha.ServerReflection";

class ReflectionV1Service : public grpc::CallbackGenericService {
 public:
  // `services`: what list_services answers (fully qualified names, this service included).
  explicit ReflectionV1Service(std::vector<std::string> services);
  // Every stream has ended (gRPC's Server::Shutdown waits for that) before this runs.
  ~ReflectionV1Service() override = default;

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

  // v1 streams open now (tests and the fuzzer check that none outlives its call).
  int open_streams() const { return open_streams_.load(); }

 private:
  class Stream;

  const std::vector<std::string> services_;
  std::atomic<int> open_streams_{0};
};

}  // namespace mulo::server

#endif  // MULO_SERVER_REFLECTION_V1_SERVICE_H_
