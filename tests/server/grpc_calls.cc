#include "tests/server/grpc_calls.h"

#include <gtest/gtest.h>

#include <chrono>

namespace mulo::testing {

v1::GenerateRequest ValidRequest(uint64_t seed) {
  v1::GenerateRequest request;
  request.set_model("tiny");
  request.set_prompt(kPrompt);
  request.mutable_sampling()->set_seed(seed);
  return request;
}

std::vector<uint32_t> ImageTokens(const StreamResult& r) {
  return std::vector<uint32_t>(r.image->tokens().begin(), r.image->tokens().end());
}

StreamResult RunStream(v1::ImageGeneration::Stub& stub, const v1::GenerateRequest& request,
                       double timeout_seconds, std::function<void(const v1::RowsEvent&)> on_row) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  StreamResult result;
  auto reader = stub.Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.has_rows()) {
      result.rows.push_back(response.rows());
      if (on_row) on_row(response.rows());
    }
    if (response.has_image()) result.image = response.image();
  }
  result.status = reader->Finish();
  return result;
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(const ServerProcess& server,
                                                            const std::string& service,
                                                            grpc::StatusCode* code) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (code != nullptr) *code = status.error_code();
  if (!status.ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  return response.status();
}

void ExpectEachRefusedNamingItsField(v1::ImageGeneration::Stub& stub,
                                     const std::vector<BadRequest>& bad) {
  for (const auto& b : bad) {
    v1::GenerateRequest request = ValidRequest();
    b.mutate(&request);
    StreamResult result = RunStream(stub, request);
    EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << b.field << ": " << result.status.error_message();
    EXPECT_EQ(result.status.error_message().rfind(b.field + ":", 0), 0u)
        << "message should start with '" << b.field << ":', got: " << result.status.error_message();
  }
}

}  // namespace mulo::testing
