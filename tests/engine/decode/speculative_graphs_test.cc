// Speculative decoding's step as two graph replays and one host read (issue 61): over pools
// with (emulated) graphs, the chain drafter's row graphs draft the chain (row_graphs.h,
// Shape::drafts) and the target's verify graphs score, judge and re-draw it
// (verify_graphs.h). A request
//   - decodes the tokens of the eager step (ExactVerifier on the host side of the same Philox
//     numbers): greedy exactly, and so ar's greedy tokens; sampled up to a rounding flip, as
//     row_graphs_test allows (the eager verification pads its rows, the graph does not);
//   - pays per step two replays, one read and a bounded number of operators outside graphs;
//   - batches its chains and verifications with other requests' in one replay each, whatever
//     their temperatures and guidance, each keeping its lone tokens;
//   - steps eagerly where the graphs cannot serve it (another gamma, top-k, a custom rule).
#include <memory>
#include <string>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/core/op_count.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/kv_demand.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model_set.h"
#include "engine/model/verify_graphs.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

std::shared_ptr<const ModelSet> Emulated() {
  LoadOptions options;
  options.emulate_cuda_graphs = true;
  static const std::shared_ptr<const ModelSet> family = testing::LoadSynthFamily(options);
  return family;
}

DecodeRequest Request(const ModelSet& family, const std::string& method, int prompt,
                      double temperature, double cfg_scale = 0, int64_t top_k = 0) {
  DecodeRequest request = testing::SynthRequest({method, prompt, temperature}, family);
  if (cfg_scale > 0) request.sampling.cfg_scale = cfg_scale;
  request.sampling.top_k = top_k;
  return request;
}

// `method` ("speculative" or "ar") with speculative's gamma `gamma` (0: the default).
StatusOr<DecodeResult> Decode(const ModelSet& family, const std::string& method,
                              DecodeRequest request, EngineLoop* loop = nullptr,
                              KvReservation* kv = nullptr, int64_t gamma = 0) {
  MULO_ASSIGN_OR_RETURN(MethodConfig config, DefaultMethodConfig(method, family));
  if (gamma > 0) config.speculative.gamma = gamma;
  MULO_ASSIGN_OR_RETURN(auto decoder, MakeMethod(config, family));
  request.loop = loop;
  request.kv = kv;
  NullProgressSink sink;
  CancelToken cancel;
  return decoder->Decode(request, family, sink, cancel);
}

std::unique_ptr<KvPools> Pools(const ModelSet& family, int64_t requests) {
  auto made = KvPools::Make({{"synth", &family}}, requests);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(*made) : nullptr;
}

std::unique_ptr<KvReservation> Reserve(KvPools& pools, const ModelSet& family,
                                       const DecodeRequest& request) {
  return pools.Reserve(RequestKvDemand(family, "speculative", request.sampling));
}

// Steps the graphs cannot take: those whose chain would run past the image's end (the last
// few tokens), each at most gamma + 1 replays and two reads.
constexpr int64_t kEagerTailSteps = KvPools::kGraphedChain - 1;

TEST(SpeculativeGraphsTest, AStepIsTwoReplaysAndOneReadWithTheEagerStepsTokens) {
  const ModelSet& plain = testing::SynthFamily();
  const auto emulated = Emulated();
  ASSERT_NE(emulated, nullptr);
  auto pools = Pools(*emulated, 1);
  ASSERT_NE(pools, nullptr);
  for (double temperature : {0.0, 1.0}) {
    int mismatches = 0;
    for (int prompt : {0, 1, 2}) {
      const DecodeRequest request = Request(*emulated, "speculative", prompt, temperature);
      auto eager = Decode(plain, "speculative", request);
      ASSERT_OK(eager);
      EXPECT_EQ(eager->stats.graph_replays, 0);
      auto reservation = Reserve(*pools, *emulated, request);
      ASSERT_NE(reservation, nullptr);
      StatusOr<DecodeResult> graphed = InternalError("not run");
      {
        OpCounting counting;
        graphed = Decode(*emulated, "speculative", request, nullptr, reservation.get());
      }
      ASSERT_OK(graphed);
      const Stats& stats = graphed->stats;
      const int64_t steps = stats.verify_steps;
      std::cout << "[speculative] temperature " << temperature << ", prompt " << prompt << ": "
                << steps << " steps, " << stats.graph_replays << " replays, " << stats.host_syncs
                << " reads, " << stats.dispatched_ops << " operators outside graphs ("
                << static_cast<double>(stats.dispatched_ops) / static_cast<double>(steps)
                << " per step); eager: " << eager->stats.graph_replays << " replays, "
                << eager->stats.host_syncs << " reads, " << eager->stats.dispatched_ops
                << " operators\n";
      // Two prefills, then two replays and one read per step but the eager tail's.
      EXPECT_GE(stats.graph_replays, 2 + 2 * steps);
      EXPECT_LE(stats.graph_replays,
                2 + 2 * steps + kEagerTailSteps * (KvPools::kGraphedChain - 1));
      EXPECT_GE(stats.host_syncs, steps);
      EXPECT_LE(stats.host_syncs, steps + kEagerTailSteps + 1);
      EXPECT_LE(stats.dispatched_ops, 60 * steps) << "at most 50 per step and the eager tail";
      EXPECT_EQ(stats.draft_forward_passes, eager->stats.draft_forward_passes);
      EXPECT_EQ(graphed->tokens.size(), eager->tokens.size());
      if (graphed->tokens != eager->tokens) {
        ++mismatches;
        std::cout << "[speculative] temperature " << temperature << ", prompt " << prompt
                  << ": tokens differ\n";
      } else if (temperature == 1.0 && prompt == 0) {
        break;
      }
      if (temperature == 0.0) {
        auto ar = Decode(plain, "ar", Request(plain, "ar", prompt, 0.0));
        ASSERT_OK(ar);
        EXPECT_EQ(graphed->tokens, ar->tokens) << "greedy speculative is ar, prompt " << prompt;
      }
    }
    EXPECT_LE(mismatches, temperature == 0.0 ? 0 : 1) << "at temperature " << temperature;
  }
}

TEST(SpeculativeGraphsTest, ChainsOfRequestsWithDifferentSamplingShareReplays) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 3);
  ASSERT_NE(pools, nullptr);
  const std::vector<DecodeRequest> requests = {
      Request(*family, "speculative", 0, 1.0), Request(*family, "speculative", 1, 0.0),
      Request(*family, "speculative", 2, 0.7, 2.0)};
  std::vector<std::vector<int32_t>> alone;
  int64_t lone_replays = 0;
  for (const DecodeRequest& request : requests) {
    auto reservation = Reserve(*pools, *family, request);
    ASSERT_NE(reservation, nullptr);
    auto own = Decode(*family, "speculative", request, nullptr, reservation.get());
    ASSERT_OK(own);
    alone.push_back(own->tokens);
    lone_replays += own->stats.graph_replays;
  }
  const PoolGraphs::Counts before = pools->graph_counts();
  EngineLoop loop({/*max_rows=*/256, PackedGemms::kPerSequence});
  std::vector<StatusOr<DecodeResult>> results(requests.size(), InternalError("not run"));
  std::vector<EngineLoop::Task> tasks;
  for (size_t i = 0; i < requests.size(); ++i) {
    tasks.push_back([&, i] {
      auto reservation = Reserve(*pools, *family, requests[i]);
      if (reservation == nullptr) return;
      results[i] = Decode(*family, "speculative", requests[i], &loop, reservation.get());
    });
  }
  EngineLoop::ListSource source(std::move(tasks), 3);
  ASSERT_OK(loop.Serve(source));
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_OK(results[i]);
    EXPECT_EQ(results[i]->tokens, alone[i]) << "request " << i;
  }
  const PoolGraphs::Counts after = pools->graph_counts();
  const int64_t replays = after.replays - before.replays, calls = after.calls - before.calls;
  std::cout << "[speculative] 3 requests in one loop: " << replays << " replays carried "
            << calls << " calls (alone: " << lone_replays << " replays)\n";
  EXPECT_EQ(calls, lone_replays) << "every call the requests make alone, batched";
  EXPECT_LT(replays, lone_replays * 2 / 3) << "chains share replays";
  EXPECT_GE(loop.counters().max_calls, 3);
}

TEST(SpeculativeGraphsTest, ChainsTheGraphsDoNotHoldStepEagerly) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 1);
  ASSERT_NE(pools, nullptr);
  struct Case {
    DecodeRequest request;
    int64_t gamma;
  };
  for (const Case& c : {Case{Request(*family, "speculative", 0, 1.0), 3},
                        Case{Request(*family, "speculative", 0, 1.0, 0, /*top_k=*/50), 0}}) {
    auto reservation = Reserve(*pools, *family, c.request);
    ASSERT_NE(reservation, nullptr);
    auto pooled = Decode(*family, "speculative", c.request, nullptr, reservation.get(), c.gamma);
    ASSERT_OK(pooled);
    const int64_t steps = pooled->stats.verify_steps;
    // The eager step: a drafter forward per draft and a verification, two reads.
    EXPECT_GE(pooled->stats.host_syncs, 2 * steps - 1) << "gamma " << c.gamma;
    EXPECT_GT(pooled->stats.graph_replays, 3 * steps) << "gamma " << c.gamma;
    EXPECT_EQ(pooled->tokens.size(), static_cast<size_t>(family->target->num_image_tokens()));
  }
}

TEST(SpeculativeGraphsTest, AChainThatDoesNotFitIsRefused) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 1);
  ASSERT_NE(pools, nullptr);
  const DecodeRequest request = Request(*family, "speculative", 0, 1.0);
  auto reservation = Reserve(*pools, *family, request);
  ASSERT_NE(reservation, nullptr);
  auto target = reservation->Take(family->target.get(), 2);
  auto chain = reservation->Take(family->chain.get(), 2);
  ASSERT_TRUE(target.has_value() && chain.has_value());
  VerifyGraphs* verify = VerifyGraphs::Of(*target);
  RowGraphs* drafts = RowGraphs::Of(*chain);
  ASSERT_NE(verify, nullptr);
  ASSERT_NE(drafts, nullptr);
  EXPECT_EQ(verify->drafts(), KvPools::kGraphedChain);
  EXPECT_TRUE(drafts->shape().drafts);
  EXPECT_EQ(drafts->tokens(), KvPools::kGraphedChain);
  EXPECT_EQ(VerifyGraphs::Of(*chain), nullptr) << "the drafter verifies nothing";
  SamplingParams filtered = request.sampling;
  filtered.top_p = 0.9;
  EXPECT_TRUE(verify->Fits(*target, request.sampling));
  EXPECT_FALSE(verify->Fits(*target, filtered));
  // A chain of the wrong length, and a drafter call without a prefix, move nothing.
  VerifyGraphs::Call call;
  call.cache = &*target;
  call.drafts = torch::zeros({KvPools::kGraphedChain + 1}, torch::kInt64);
  call.sampling = request.sampling;
  EXPECT_EQ(verify->Run({call}).status().code(), StatusCode::kInvalidArgument);
  RowGraphs::Call draft;
  draft.cache = &*chain;
  draft.sampling = request.sampling;
  EXPECT_EQ(drafts->Run({draft}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(target->length(), 0);
  EXPECT_EQ(chain->length(), 0);
}

}  // namespace
}  // namespace mulo::engine
