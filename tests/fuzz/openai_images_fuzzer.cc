// Fuzzes the HTTP API's body reader (issue 41): arbitrary bytes as a POST
// /v1/images/generations body, then, when they read, the request validated against the tiny
// test family exactly as the server does. Nothing crashes; a refusal is INVALID_ARGUMENT with a
// message and the field it names; the error object always serialises.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/http/openai_images.h"
#include "server/request_validation.h"
#include "tests/fuzz/tiny_repository.h"

using mulo::testing::TinyRepository;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  TinyRepository();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mulo::server;
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto parsed = http::ParseImagesRequest(body);
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    if (parsed.status().message().empty()) std::abort();
    // The field named exactly: an empty key is a field named "".
    if (http::ParamOf(parsed.status()).empty() && body.find("\"\"") == std::string::npos) {
      std::abort();
    }
    if (http::ErrorJson(parsed.status(), 400).empty()) std::abort();
    return 0;
  }
  parsed->request.set_model("tiny");
  auto validated = ValidateRequest(parsed->request, TinyRepository());
  if (!validated.ok() && http::ErrorJson(validated.status(), 400).empty()) std::abort();
  return 0;
}
