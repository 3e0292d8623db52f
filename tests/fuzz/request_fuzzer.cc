// Fuzzes request validation from the wire: arbitrary bytes parsed as a GenerateRequest and,
// when they parse, validated against the tiny test family exactly as the server does. Every
// request is refused with a status or turned into a runnable method; nothing crashes, and a
// refusal is INVALID_ARGUMENT, NOT_FOUND or UNIMPLEMENTED with a message.
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "mulo/v1/image_generation.pb.h"
#include "server/request_validation.h"
#include "tests/fuzz/tiny_repository.h"

using mulo::testing::TinyRepository;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  TinyRepository();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mulo::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto validated = mulo::server::ValidateRequest(request, TinyRepository());
  if (validated.ok()) {
    if (validated->plan.decoder == nullptr || validated->engine == nullptr) std::abort();
  } else {
    const absl::StatusCode code = validated.status().code();
    if (code != absl::StatusCode::kInvalidArgument && code != absl::StatusCode::kNotFound &&
        code != absl::StatusCode::kUnimplemented) {
      std::abort();
    }
    if (validated.status().message().empty()) std::abort();
  }
  return 0;
}
