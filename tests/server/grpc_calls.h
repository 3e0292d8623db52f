// Client-side helpers shared by the tests that drive a mulo_server process over gRPC: the
// valid request every test mutates, a whole Generate stream collected, the refusal check.
#ifndef MULO_TESTS_SERVER_GRPC_CALLS_H_
#define MULO_TESTS_SERVER_GRPC_CALLS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "mulo/v1/image_generation.grpc.pb.h"
#include "tests/server/server_process.h"

namespace mulo::testing {

inline constexpr char kPrompt[] = "a small red circle in the top left on a blue background";
// The tiny family of tests/data/repository, served as "tiny" (a 32 x 32 token grid).
inline const std::vector<std::string> kRepository = {"--model_repository=tests/data/repository"};

// A valid request for the tiny model with this seed (method ar).
v1::GenerateRequest ValidRequest(uint64_t seed = 1);

struct StreamResult {
  grpc::Status status;
  std::vector<v1::RowsEvent> rows;
  std::optional<v1::ImageEvent> image;
};

// The final image's token ids.
std::vector<uint32_t> ImageTokens(const StreamResult& r);

// One Generate call read to its end, with a deadline `timeout_seconds` from now.
StreamResult RunStream(v1::ImageGeneration::Stub& stub, const v1::GenerateRequest& request,
                       double timeout_seconds = 60,
                       std::function<void(const v1::RowsEvent&)> on_row = nullptr);

// The health service's answer for `service` ("" = the whole server); UNKNOWN when the call
// fails. `code`, if given, receives the call's status code.
grpc::health::v1::HealthCheckResponse::ServingStatus Health(const ServerProcess& server,
                                                            const std::string& service = "",
                                                            grpc::StatusCode* code = nullptr);

// ValidRequest() changed in one field.
struct BadRequest {
  std::string field;
  std::function<void(v1::GenerateRequest*)> mutate;
};

// Each bad request is INVALID_ARGUMENT with a message that starts "<field>:".
void ExpectEachRefusedNamingItsField(v1::ImageGeneration::Stub& stub,
                                     const std::vector<BadRequest>& bad);

}  // namespace mulo::testing

#endif  // MULO_TESTS_SERVER_GRPC_CALLS_H_
