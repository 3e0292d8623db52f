#include "server/kv_pool_sizing.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mulo::server {

absl::StatusOr<int64_t> KvPoolRequests(int64_t memory_mib, int max_batch, int64_t request_bytes) {
  if (memory_mib < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_cache_memory: must be >= 0 MiB (0: --max_batch requests' worth), got ",
                     memory_mib));
  }
  const int64_t batch = std::max(1, max_batch);
  if (memory_mib == 0 || request_bytes <= 0) return batch;
  const int64_t requests = (memory_mib << 20) / request_bytes;
  if (requests < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv_cache_memory: ", memory_mib, " MiB per worker holds no request's KV caches (one "
        "takes ", (request_bytes + (1 << 20) - 1) >> 20, " MiB for the families loaded)"));
  }
  return std::min(requests, batch);
}

}  // namespace mulo::server
