// How many requests' worth of KV-cache slots each worker's pools hold (engine/decode/kv_pools.h).
#ifndef MULO_SERVER_KV_POOL_SIZING_H_
#define MULO_SERVER_KV_POOL_SIZING_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace mulo::server {

// `memory_mib` (--kv_cache_memory) 0: --max_batch requests' worth, so that memory never holds
// back a batch. Otherwise as many requests as that memory holds at `request_bytes` each (one
// request's slots over every family's caching models), at most `max_batch` (more could never
// run at once). INVALID_ARGUMENT naming --kv_cache_memory when it is negative or holds less
// than one request.
absl::StatusOr<int64_t> KvPoolRequests(int64_t memory_mib, int max_batch, int64_t request_bytes);

}  // namespace mulo::server

#endif  // MULO_SERVER_KV_POOL_SIZING_H_
