// What the tests of graphs captured over the KV-cache pools share (row_graphs_test,
// verify_graphs_test): the synth family with emulated CUDA graphs, its pools, a request's
// reservation and a decode of a method's configuration with an optional loop and reservation.
#ifndef MULO_TESTS_ENGINE_DECODE_POOLED_DECODE_H_
#define MULO_TESTS_ENGINE_DECODE_POOLED_DECODE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/decode/engine_loop.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"

namespace mulo::engine::testing {

// The synth family loaded once with LoadOptions::emulate_cuda_graphs.
std::shared_ptr<const ModelSet> EmulatedSynthFamily();
// The family's pools for `requests` requests (null, and a test failure, when they cannot be made).
std::unique_ptr<KvPools> SynthPools(const ModelSet& family, int64_t requests);
// What `method` reserves for `request`.
std::unique_ptr<KvReservation> ReserveFor(KvPools& pools, const ModelSet& family,
                                          const std::string& method, const DecodeRequest& request);
// `config`'s method decoding `request` on `family`, in `loop` and over `kv` when given.
StatusOr<DecodeResult> DecodeConfig(const MethodConfig& config, const ModelSet& family,
                                    DecodeRequest request, EngineLoop* loop = nullptr,
                                    KvReservation* kv = nullptr);

// `config`'s method decoding `request` on the plain `family` (the eager steps' oracle), then on
// `emulated` over a reservation of `pools` with its operators counted (OpCounting): what the
// graphs' tests compare. An error when either decode fails or nothing can be reserved.
struct EagerAndPooled {
  DecodeResult eager, pooled;
};
StatusOr<EagerAndPooled> DecodeEagerAndPooled(const MethodConfig& config, const ModelSet& family,
                                              const ModelSet& emulated, KvPools& pools,
                                              const DecodeRequest& request);
// `config`'s method decoding each of `requests` alone over a reservation of `pools`: their
// tokens (what a loop's requests must keep).
StatusOr<std::vector<std::vector<int>>> DecodeEachAlone(const MethodConfig& config,
                                                        const ModelSet& family, KvPools& pools,
                                                        const std::vector<DecodeRequest>& requests);
// The same requests stepping together in one engine loop (per-request GEMMs, every request a
// task over its own reservation, operators counted): each one's result, in order.
StatusOr<std::vector<DecodeResult>> DecodeInOneLoop(const MethodConfig& config,
                                                    const ModelSet& family, KvPools& pools,
                                                    const std::vector<DecodeRequest>& requests);
// A pooled decode's counts, per step: "S steps, R replays, H reads, O operators outside
// graphs (O / S per step)".
std::string StepCounts(const Stats& stats);

// The sampling settings the graph tests decode a method with: greedy, sampled, and sampled with
// top-k 50 and top-p 0.9 (the graphs' filtered copies).
struct SamplingSetting {
  double temperature;
  int64_t top_k;
  double top_p;
};
inline constexpr SamplingSetting kGraphSettings[] = {{0.0, 0, 1.0}, {1.0, 0, 1.0}, {1.0, 50, 0.9}};
// ar's greedy tokens for the synth prompt `prompt` on `family`, decoded once per process.
StatusOr<std::vector<int>> GreedyArTokens(const ModelSet& family, int prompt);

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_DECODE_POOLED_DECODE_H_
