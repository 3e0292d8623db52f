// Verification steps in graphs captured at load (issue 61): over pools with (emulated) graphs,
//   - speculative's step is two replays and one read: the chain drafter's row graphs draft the
//     chain (row_graphs.h, Shape::drafts), the target's verify graphs score and judge it
//     (verify_graphs.h);
//   - SJD's iteration is one replay and one read: the verify graphs also re-draw the window
//     (Shape::redraw) and keep p as the carried drafts' q; GSD's too, its drafts judged by
//     their groups in the graph (Shape::group_size) with the eager verdict's relaxation counts,
//     and MC-SJD's, its window re-drawn by the maximal coupling in the graph (Shape::couple).
// A request
//   - decodes the tokens of the eager step (ExactVerifier and the re-draw on the host side of
//     the same Philox numbers): greedy exactly, and so ar's greedy tokens; sampled up to a
//     rounding flip, as row_graphs_test allows (the eager verification pads its rows, the
//     graph does not);
//   - pays per step its replays, one read and a bounded number of operators outside graphs;
//   - with top-k and top-p, is judged and re-drawn by the filtered p in filtered graphs, with
//     the eager filtered step's tokens;
//   - batches its steps with other requests' (of either method) in one replay per graph,
//     whatever their temperatures, guidance and filters, each keeping its lone tokens;
//   - steps eagerly where the graphs cannot serve it (another gamma, window or group size).
#include <memory>
#include <string>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/core/op_count.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model_set.h"
#include "engine/model/verify_graphs.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/pooled_decode.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

std::shared_ptr<const ModelSet> Emulated() { return testing::EmulatedSynthFamily(); }

DecodeRequest Request(const ModelSet& family, const std::string& method, int prompt,
                      double temperature, double cfg_scale = 0, int64_t top_k = 0,
                      double top_p = 1.0) {
  DecodeRequest request = testing::SynthRequest({method, prompt, temperature}, family);
  if (cfg_scale > 0) request.sampling.cfg_scale = cfg_scale;
  request.sampling.top_k = top_k;
  request.sampling.top_p = top_p;
  return request;
}

// A request's sampling: greedy, sampled, and sampled with both filters.
struct Setting {
  double temperature;
  int64_t top_k;
  double top_p;
};
constexpr Setting kSettings[] = {{0.0, 0, 1.0}, {1.0, 0, 1.0}, {1.0, 50, 0.9}};

// `method` with speculative's gamma and the Jacobi methods' window `length`, GSD's group size
// `group_size` (0: the defaults).
StatusOr<DecodeResult> Decode(const ModelSet& family, const std::string& method,
                              DecodeRequest request, EngineLoop* loop = nullptr,
                              KvReservation* kv = nullptr, int64_t length = 0,
                              int64_t group_size = 0) {
  MULO_ASSIGN_OR_RETURN(MethodConfig config, DefaultMethodConfig(method, family));
  if (length > 0) {
    config.speculative.gamma = config.sjd.window = config.gsd.window = config.mc_sjd.window =
        length;
  }
  if (group_size > 0) config.gsd.group.size = group_size;
  return testing::DecodeConfig(config, family, std::move(request), loop, kv);
}

std::unique_ptr<KvPools> Pools(const ModelSet& family, int64_t requests) {
  return testing::SynthPools(family, requests);
}

std::unique_ptr<KvReservation> Reserve(KvPools& pools, const ModelSet& family,
                                       const std::string& method, const DecodeRequest& request) {
  return testing::ReserveFor(pools, family, method, request);
}

// What a method's graphed step costs (every step, the image's last ones included).
struct GraphedMethod {
  std::string name;
  int64_t prefills;          // replays before the first step
  int64_t replays_per_step;  // a step's
};
const std::vector<GraphedMethod>& GraphedMethods() {
  static const std::vector<GraphedMethod> methods = {
      {"speculative", 2, 2}, {"sjd", 1, 1}, {"gsd", 1, 1}, {"mc_sjd", 1, 1}};
  return methods;
}

TEST(VerifyGraphsTest, AStepIsItsReplaysAndOneReadWithTheEagerStepsTokens) {
  const ModelSet& plain = testing::SynthFamily();
  const auto emulated = Emulated();
  ASSERT_NE(emulated, nullptr);
  auto pools = Pools(*emulated, 1);
  ASSERT_NE(pools, nullptr);
  for (const GraphedMethod& method : GraphedMethods()) {
    for (const Setting& setting : kSettings) {
      const double temperature = setting.temperature;
      int mismatches = 0;
      for (int prompt : {0, 1, 2}) {
        const DecodeRequest request = Request(*emulated, method.name, prompt, temperature, 0,
                                              setting.top_k, setting.top_p);
        auto eager = Decode(plain, method.name, request);
        ASSERT_OK(eager);
        EXPECT_EQ(eager->stats.graph_replays, 0);
        auto reservation = Reserve(*pools, *emulated, method.name, request);
        ASSERT_NE(reservation, nullptr);
        StatusOr<DecodeResult> graphed = InternalError("not run");
        {
          OpCounting counting;
          graphed = Decode(*emulated, method.name, request, nullptr, reservation.get());
        }
        ASSERT_OK(graphed);
        const Stats& stats = graphed->stats;
        const int64_t steps = stats.verify_steps;
        std::cout << "[" << method.name << "] temperature " << temperature << ", top_k "
                  << setting.top_k << ", prompt " << prompt << ": " << steps << " steps, " << stats.graph_replays
                  << " replays, " << stats.host_syncs << " reads, " << stats.dispatched_ops
                  << " operators outside graphs ("
                  << static_cast<double>(stats.dispatched_ops) / static_cast<double>(steps)
                  << " per step); eager: " << eager->stats.host_syncs << " reads\n";
        // The prefills, then the step's replays and one read per step (and token 0's draw and
        // the image's last read).
        EXPECT_EQ(stats.graph_replays, method.prefills + method.replays_per_step * steps)
            << method.name;
        EXPECT_GE(stats.host_syncs, steps) << method.name;
        EXPECT_LE(stats.host_syncs, steps + 2) << method.name;
        EXPECT_LE(stats.dispatched_ops, 50 * steps)
            << method.name << ": at most 50 per step, the prefills' included";
        // The image's last steps draft a whole chain past its end (their forwards are in the
        // graph): at most gamma - 1 drafter forwards more for each of gamma - 1 steps.
        EXPECT_GE(stats.draft_forward_passes, eager->stats.draft_forward_passes);
        EXPECT_LE(stats.draft_forward_passes,
                  eager->stats.draft_forward_passes +
                      (KvPools::kGraphedChain - 1) * (KvPools::kGraphedChain - 1));
        EXPECT_EQ(graphed->tokens.size(), eager->tokens.size());
        if (graphed->tokens == eager->tokens) {  // GSD's relaxation, counted as eagerly
          EXPECT_EQ(stats.relaxed_accepted_tokens, eager->stats.relaxed_accepted_tokens)
              << method.name;
          EXPECT_EQ(stats.pooled_drafts, eager->stats.pooled_drafts) << method.name;
          EXPECT_EQ(stats.pooled_neighbors, eager->stats.pooled_neighbors) << method.name;
        }
        if (method.name == "gsd" && temperature == 1.0) {
          std::cout << "[gsd] relaxed " << stats.relaxed_accepted_tokens << ", pooled drafts "
                    << stats.pooled_drafts << ", neighbours " << stats.pooled_neighbors
                    << " (eager " << eager->stats.relaxed_accepted_tokens << ", "
                    << eager->stats.pooled_drafts << ", " << eager->stats.pooled_neighbors
                    << ")\n";
        }
        if (graphed->tokens != eager->tokens) {
          ++mismatches;
          std::cout << "[" << method.name << "] temperature " << temperature << ", prompt "
                    << prompt << ": tokens differ\n";
        } else if (temperature == 1.0 && prompt == 0) {
          break;
        }
        if (temperature == 0.0) {
          auto ar = testing::GreedyArTokens(plain, prompt);
          ASSERT_OK(ar);
          EXPECT_EQ(graphed->tokens, *ar)
              << "greedy " << method.name << " is ar, prompt " << prompt;
        }
      }
      EXPECT_LE(mismatches, temperature == 0.0 ? 0 : 1)
          << method.name << " at temperature " << temperature << ", top_k " << setting.top_k;
    }
  }
}

TEST(VerifyGraphsTest, StepsOfRequestsWithDifferentSamplingShareReplays) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 4);
  ASSERT_NE(pools, nullptr);
  const std::vector<std::string> methods = {"speculative", "speculative", "sjd", "sjd"};
  // One of each method filters: both graphs replay their filtered copies, which judge the
  // others as their unfiltered graphs do alone.
  const std::vector<DecodeRequest> requests = {
      Request(*family, "speculative", 0, 1.0, 0, /*top_k=*/0, /*top_p=*/0.8),
      Request(*family, "speculative", 1, 0.0), Request(*family, "sjd", 2, 0.7, 2.0, 40),
      Request(*family, "sjd", 3, 1.0)};
  std::vector<std::vector<int32_t>> alone;
  int64_t lone_replays = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto reservation = Reserve(*pools, *family, methods[i], requests[i]);
    ASSERT_NE(reservation, nullptr);
    auto own = Decode(*family, methods[i], requests[i], nullptr, reservation.get());
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
      auto reservation = Reserve(*pools, *family, methods[i], requests[i]);
      if (reservation == nullptr) return;
      results[i] = Decode(*family, methods[i], requests[i], &loop, reservation.get());
    });
  }
  EngineLoop::ListSource source(std::move(tasks), 4);
  ASSERT_OK(loop.Serve(source));
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_OK(results[i]);
    EXPECT_EQ(results[i]->tokens, alone[i]) << "request " << i;
  }
  const PoolGraphs::Counts after = pools->graph_counts();
  const int64_t replays = after.replays - before.replays, calls = after.calls - before.calls;
  std::cout << "[verify graphs] 4 requests in one loop: " << replays << " replays carried "
            << calls << " calls (alone: " << lone_replays << " replays)\n";
  EXPECT_EQ(calls, lone_replays) << "every call the requests make alone, batched";
  EXPECT_LT(replays, lone_replays * 2 / 3) << "steps share replays";
  EXPECT_GE(loop.counters().max_calls, 4);
}

TEST(VerifyGraphsTest, StepsTheGraphsDoNotHoldRunEagerly) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 1);
  ASSERT_NE(pools, nullptr);
  struct Case {
    std::string method;
    int64_t length;      // gamma or window; 0: the default
    int64_t group_size;  // GSD's; 0: the default
  };
  const std::vector<Case> cases = {{"speculative", 3, 0}, {"sjd", 8, 0}, {"gsd", 8, 0},
                                   {"gsd", 0, 5},         {"mc_sjd", 16, 0}};
  // The graphs' own counters (found through a cache of each pool, given back before decoding).
  std::vector<const VerifyGraphs*> verify;
  const RowGraphs* chains = nullptr;
  auto mc_sjd = DefaultMethodConfig("mc_sjd", *family);
  ASSERT_OK(mc_sjd);
  const int64_t mc_sjd_window = mc_sjd->mc_sjd.window;
  EXPECT_EQ(mc_sjd_window, 32) << "the family's default, not MC-SJD's own (64)";
  {
    auto probe = Reserve(*pools, *family, "speculative", Request(*family, "speculative", 0, 1.0));
    ASSERT_NE(probe, nullptr);
    auto target = probe->Take(family->target.get(), 2);
    auto chain = probe->Take(family->chain.get(), 2);
    ASSERT_TRUE(target.has_value() && chain.has_value());
    verify = {VerifyGraphs::Of(*target, {KvPools::kGraphedChain, /*redraw=*/false}),
              VerifyGraphs::Of(*target, {KvPools::kGraphedWindow, /*redraw=*/true}),
              VerifyGraphs::Of(*target, {KvPools::kGraphedWindow, /*redraw=*/true,
                                         KvPools::kGraphedGroup}),
              // MC-SJD's at the family's default window (32 for synth: family.json).
              VerifyGraphs::Of(*target, {mc_sjd_window, /*redraw=*/true,
                                         /*group_size=*/0, /*couple=*/true})};
    chains = RowGraphs::Of(*chain);
  }
  for (const VerifyGraphs* graphs : verify) ASSERT_NE(graphs, nullptr);
  ASSERT_NE(chains, nullptr);
  const auto graphed_calls = [&] {
    int64_t calls = chains->counts().calls;
    for (const VerifyGraphs* graphs : verify) calls += graphs->counts().calls;
    return calls;
  };
  for (const Case& c : cases) {
    const DecodeRequest request = Request(*family, c.method, 0, 1.0);
    auto reservation = Reserve(*pools, *family, c.method, request);
    ASSERT_NE(reservation, nullptr);
    const int64_t before = graphed_calls();
    StatusOr<DecodeResult> pooled = InternalError("not run");
    {
      OpCounting counting;
      pooled = Decode(*family, c.method, request, nullptr, reservation.get(), c.length,
                      c.group_size);
    }
    ASSERT_OK(pooled);
    EXPECT_EQ(graphed_calls(), before)
        << c.method << ", length " << c.length << ", group size " << c.group_size;
    EXPECT_GT(pooled->stats.dispatched_ops, 100 * pooled->stats.verify_steps)
        << c.method << ": the eager step's operators";
    EXPECT_EQ(pooled->tokens.size(), static_cast<size_t>(family->target->num_image_tokens()));
  }
  // The same requests with the graphs' lengths do reach them, filtered by top-k too.
  for (const std::string method : {"speculative", "sjd", "gsd", "mc_sjd"}) {
    const DecodeRequest request = Request(*family, method, 0, 1.0, 0, /*top_k=*/50);
    auto reservation = Reserve(*pools, *family, method, request);
    ASSERT_NE(reservation, nullptr);
    const int64_t before = graphed_calls();
    ASSERT_OK(Decode(*family, method, request, nullptr, reservation.get()));
    EXPECT_GT(graphed_calls(), before) << method;
  }
}

TEST(VerifyGraphsTest, AChainThatDoesNotFitIsRefused) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 1);
  ASSERT_NE(pools, nullptr);
  const DecodeRequest request = Request(*family, "speculative", 0, 1.0);
  auto reservation = Reserve(*pools, *family, "speculative", request);
  ASSERT_NE(reservation, nullptr);
  auto target = reservation->Take(family->target.get(), 2);
  auto chain = reservation->Take(family->chain.get(), 2);
  ASSERT_TRUE(target.has_value() && chain.has_value());
  const VerifyGraphs::Shape chains{KvPools::kGraphedChain, /*redraw=*/false};
  const VerifyGraphs::Shape windows{KvPools::kGraphedWindow, /*redraw=*/true};
  VerifyGraphs* verify = VerifyGraphs::Of(*target, chains);
  RowGraphs* drafts = RowGraphs::Of(*chain);
  ASSERT_NE(verify, nullptr);
  ASSERT_NE(drafts, nullptr);
  EXPECT_EQ(verify->drafts(), KvPools::kGraphedChain);
  ASSERT_NE(VerifyGraphs::Of(*target, windows), nullptr);
  EXPECT_EQ(VerifyGraphs::Of(*target, windows)->drafts(), KvPools::kGraphedWindow);
  EXPECT_EQ(VerifyGraphs::Of(*target, {KvPools::kGraphedChain, /*redraw=*/true}), nullptr)
      << "a shape no graphs were captured for";
  EXPECT_TRUE(drafts->shape().drafts);
  EXPECT_EQ(drafts->tokens(), KvPools::kGraphedChain);
  EXPECT_EQ(VerifyGraphs::Of(*chain, chains), nullptr) << "the drafter verifies nothing";
  SamplingParams filtered = request.sampling;
  filtered.top_p = 0.9;
  EXPECT_TRUE(verify->Fits(*target, request.sampling));
  EXPECT_TRUE(verify->Fits(*target, filtered)) << "its filtered copy";
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
