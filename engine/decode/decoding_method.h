// The one interface every decoding method implements (ar, speculative, mulo, eagle, ...).
#ifndef MULO_ENGINE_DECODE_DECODING_METHOD_H_
#define MULO_ENGINE_DECODE_DECODING_METHOD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/cancel_token.h"
#include "engine/decode/progress.h"
#include "engine/decode/stats.h"
#include "engine/model/condition.h"
#include "engine/model/model_set.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

class EngineLoop;     // engine_loop.h
class KvReservation;  // kv_pools.h

struct DecodeRequest {
  Condition condition;
  SamplingParams sampling;
  // Optional: every transformer forward of the request is appended here (benchmarks).
  ForwardTrace* trace = nullptr;
  // Optional: the request's transformer forwards join batches with other requests' (continuous
  // batching); its tokens are the same as without (engine_loop.h).
  EngineLoop* loop = nullptr;
  // Optional: the worker's KV-cache slots reserved for the request, which its caches are
  // taken from (kv_pools.h); without, each cache is memory of its own.
  KvReservation* kv = nullptr;
  // Phase timers wait for the GPU, so each phase is charged its kernels (benchmarks' phase
  // tables). Off (servers): no waits beyond the method's own reads, the phases' seconds are the
  // host's, and the device runs ahead of it.
  bool synchronize_phases = false;
};

struct DecodeResult {
  std::vector<int32_t> tokens;  // grid_size^2 ids in raster order
  Stats stats;
};

class DecodingMethod {
 public:
  virtual ~DecodingMethod() = default;
  virtual std::string name() const = 0;
  // Generates one image's tokens. Checks `cancel` every decoding step; every per-request
  // buffer (KV caches, RNG) is owned by this call and released when it returns.
  virtual StatusOr<DecodeResult> Decode(const DecodeRequest& request, const ModelSet& models,
                                        ProgressSink& progress,
                                        const CancelToken& cancel) const = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_DECODING_METHOD_H_
