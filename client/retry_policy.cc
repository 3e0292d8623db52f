#include "client/retry_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mulo::client {

std::string RetryServiceConfig(int max_attempts) {
  return absl::StrCat(R"({"methodConfig": [{"name": [{"service": "mulo.v1.ImageGeneration"}],)",
                      R"( "retryPolicy": {"maxAttempts": )", std::clamp(max_attempts, 2, 5),
                      R"(, "initialBackoff": "0.1s", "maxBackoff": "2s",)",
                      R"( "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"]}}]})");
}

}  // namespace mulo::client
