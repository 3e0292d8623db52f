#include "tests/engine/decode/pooled_decode.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "engine/core/op_count.h"
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

StatusOr<EagerAndPooled> DecodeEagerAndPooled(const MethodConfig& config, const ModelSet& family,
                                              const ModelSet& emulated, KvPools& pools,
                                              const DecodeRequest& request) {
  EagerAndPooled both;
  MULO_ASSIGN_OR_RETURN(both.eager, DecodeConfig(config, family, request));
  std::unique_ptr<KvReservation> reservation = ReserveFor(pools, emulated, config.name, request);
  if (reservation == nullptr) return InternalError("nothing to reserve for " + config.name);
  OpCounting counting;
  MULO_ASSIGN_OR_RETURN(both.pooled,
                        DecodeConfig(config, emulated, request, nullptr, reservation.get()));
  return both;
}

StatusOr<std::vector<std::vector<int>>> DecodeEachAlone(const MethodConfig& config,
                                                        const ModelSet& family, KvPools& pools,
                                                        const std::vector<DecodeRequest>& requests) {
  std::vector<std::vector<int>> tokens;
  for (const DecodeRequest& request : requests) {
    std::unique_ptr<KvReservation> reservation = ReserveFor(pools, family, config.name, request);
    if (reservation == nullptr) return InternalError("nothing to reserve for " + config.name);
    MULO_ASSIGN_OR_RETURN(DecodeResult own,
                          DecodeConfig(config, family, request, nullptr, reservation.get()));
    tokens.push_back(std::move(own.tokens));
  }
  return tokens;
}

StatusOr<std::vector<DecodeResult>> DecodeInOneLoop(const MethodConfig& config,
                                                    const ModelSet& family, KvPools& pools,
                                                    const std::vector<DecodeRequest>& requests) {
  EngineLoop loop({/*max_rows=*/512, PackedGemms::kPerSequence});
  std::vector<StatusOr<DecodeResult>> results(requests.size(), InternalError("not run"));
  std::vector<EngineLoop::Task> tasks;
  for (size_t i = 0; i < requests.size(); ++i) {
    tasks.push_back([&, i] {
      std::unique_ptr<KvReservation> reservation =
          ReserveFor(pools, family, config.name, requests[i]);
      if (reservation == nullptr) return;
      results[i] = DecodeConfig(config, family, requests[i], &loop, reservation.get());
    });
  }
  EngineLoop::ListSource source(std::move(tasks), static_cast<int>(requests.size()));
  OpCounting counting;  // each request's Stats count its operators and replays
  MULO_RETURN_IF_ERROR(loop.Serve(source));
  std::vector<DecodeResult> looped;
  for (StatusOr<DecodeResult>& result : results) {
    MULO_RETURN_IF_ERROR(result.status());
    looped.push_back(*std::move(result));
  }
  return looped;
}

std::string StepCounts(const Stats& stats) {
  const int64_t steps = stats.verify_steps;
  std::ostringstream line;
  line << steps << " steps, " << stats.graph_replays << " replays, " << stats.host_syncs
       << " reads, " << stats.dispatched_ops << " operators outside graphs ("
       << static_cast<double>(stats.dispatched_ops) / static_cast<double>(std::max<int64_t>(steps, 1))
       << " per step)";
  return line.str();
}

StatusOr<std::vector<int>> GreedyArTokens(const ModelSet& family, int prompt) {
  // Many cases of a test binary compare with the same few references: each is decoded once
  // per process (the families are loaded once per process too, so their addresses are keys).
  static std::mutex mutex;
  static std::map<std::pair<const ModelSet*, int>, std::vector<int>> decoded;
  const std::pair<const ModelSet*, int> key(&family, prompt);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = decoded.find(key);
    if (found != decoded.end()) return found->second;
  }
  MULO_ASSIGN_OR_RETURN(const MethodConfig ar, DefaultMethodConfig("ar", family));
  MULO_ASSIGN_OR_RETURN(DecodeResult result,
                        DecodeConfig(ar, family, SynthRequest({"ar", prompt, 0.0}, family)));
  std::lock_guard<std::mutex> lock(mutex);
  decoded[key] = result.tokens;
  return std::move(result.tokens);
}

}  // namespace mulo::engine::testing
