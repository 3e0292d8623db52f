#include "tests/engine/decode/pooled_decode.h"

#include <utility>

#include "engine/decode/graphed_shapes.h"
#include "engine/decode/kv_demand.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/synth_jobs.h"

namespace mulo::engine::testing {

std::shared_ptr<const ModelSet> EmulatedSynthFamily() {
  LoadOptions options;
  options.emulate_cuda_graphs = true;
  static const std::shared_ptr<const ModelSet> family = LoadSynthFamily(options);
  return family;
}

std::unique_ptr<KvPools> SynthPools(const ModelSet& family, int64_t requests) {
  auto pooled = PoolFamily("synth", family);
  EXPECT_TRUE(pooled.ok()) << pooled.status().ToString();
  if (!pooled.ok()) return nullptr;
  auto made = KvPools::Make({*std::move(pooled)}, requests);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(*made) : nullptr;
}

std::unique_ptr<KvReservation> ReserveFor(KvPools& pools, const ModelSet& family,
                                          const std::string& method, const DecodeRequest& request) {
  return pools.Reserve(RequestKvDemand(family, method, request.sampling));
}

StatusOr<DecodeResult> DecodeConfig(const MethodConfig& config, const ModelSet& family,
                                    DecodeRequest request, EngineLoop* loop, KvReservation* kv) {
  MULO_ASSIGN_OR_RETURN(auto method, MakeMethod(config, family));
  request.loop = loop;
  request.kv = kv;
  NullProgressSink sink;
  CancelToken cancel;
  return method->Decode(request, family, sink, cancel);
}

}  // namespace mulo::engine::testing
