// What a request reserves of its worker's KV-cache pools (kv_pools.h) before it starts.
#ifndef MULO_ENGINE_DECODE_KV_DEMAND_H_
#define MULO_ENGINE_DECODE_KV_DEMAND_H_

#include <string>

#include "engine/decode/kv_pools.h"
#include "engine/model/model_set.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

// The most a request of `method` (a registry name; unknown: the target alone) under `sampling`
// opens: its target's guidance streams (1 or 2) and two streams of each drafting model the
// method needs (a drafter may guide when the target does not).
KvDemand RequestKvDemand(const ModelSet& models, const std::string& method,
                         const SamplingParams& sampling);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_KV_DEMAND_H_
