// ZipAR's steps over the pools with (emulated) graphs (issue 61): each forward of the wavefront
// (every open row's newest token, the placeholders that open rows), its mask built from the
// tokens' rasters, guidance and the draws of every predicted token run in one replay of the
// target's ZipAR graphs (zipar_graphs.h), read once; requests of an engine loop share replays.
// A request decodes the eager step's tokens (the host-built mask, a gather and the draw):
// greedy exactly, sampled up to a rounding flip, as the other graphs' tests allow; a narrowed
// wavefront (a test's Visibility hook) steps eagerly.
#include "engine/decode/zipar_graphs.h"

#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/decode/zipar_chain_rows.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_cache.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model_set.h"
#include "engine/model/row_graphs.h"
#include "engine/sampling/sampling_params.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/pooled_decode.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

TEST(ZipArGraphsTest, AForwardDrawsInOneReplayAndReadsOnceWithTheEagerStepsTokens) {
  const ModelSet& plain = testing::SynthFamily();
  const auto emulated = testing::EmulatedSynthFamily();
  ASSERT_NE(emulated, nullptr);
  auto pools = testing::SynthPools(*emulated, 1);
  ASSERT_NE(pools, nullptr);
  const ZipArGraphs* graphs = pools->zipar_graphs(*emulated->target);
  ASSERT_NE(graphs, nullptr);
  EXPECT_GT(graphs->counts().graphs, 0);
  EXPECT_EQ(graphs->counts().failed_captures, 0);
  auto defaults = DefaultMethodConfig("zipar", plain);
  ASSERT_OK(defaults);
  const int64_t grid = plain.target->grid_size();
  // The family's window, a narrow one (many rows open at once) and the grid's (plain AR).
  for (int64_t window : {defaults->zipar.window, int64_t{2}, grid}) {
    MethodConfig config = *defaults;
    config.zipar.window = window;
    // Greedy, sampled, and (the family's window) sampled with top-k and top-p.
    for (const int64_t top_k : {int64_t{0}, int64_t{-1}, int64_t{50}}) {
      if (top_k > 0 && window != defaults->zipar.window) continue;
      const double temperature = top_k == 0 ? 0.0 : 1.0;
      int mismatches = 0;
      for (int prompt : {0, 1}) {
        DecodeRequest request = testing::SynthRequest({"zipar", prompt, temperature}, plain);
        if (top_k > 0) {
          request.sampling.top_k = top_k;
          request.sampling.top_p = 0.9;
        }
        const int64_t replays_before = graphs->counts().replays;
        auto both = testing::DecodeEagerAndPooled(config, plain, *emulated, *pools, request);
        ASSERT_OK(both);
        const DecodeResult &eager = both->eager, &graphed = both->pooled;
        const Stats& stats = graphed.stats;
        const int64_t steps = stats.verify_steps;  // forwards
        std::cout << "window " << window << ", temperature " << temperature << ", top_k "
                  << std::max<int64_t>(top_k, 0) << ", prompt " << prompt << ": "
                  << testing::StepCounts(stats) << "\n";
        ASSERT_GT(steps, 0);
        EXPECT_EQ(steps, eager.stats.verify_steps);
        // Every forward from the graphs (one replay, one read), after the prefill's replay.
        EXPECT_EQ(graphs->counts().replays - replays_before, steps);
        EXPECT_EQ(stats.graph_replays, steps + 1);
        EXPECT_LE(stats.host_syncs, steps + 1);
        EXPECT_LE(stats.dispatched_ops, 50 * steps);
        if (graphed.tokens != eager.tokens) {
          ++mismatches;
          std::cout << "window " << window << ", temperature " << temperature << ", prompt "
                    << prompt << ": tokens differ\n";
        }
        if (window == grid && temperature == 0.0) {
          auto ar = testing::GreedyArTokens(plain, prompt);
          ASSERT_OK(ar);
          EXPECT_EQ(graphed.tokens, *ar) << "ZipAR over the whole row is ar";
        }
      }
      EXPECT_LE(mismatches, temperature == 0.0 ? 0 : 1)
          << "window " << window << ", temperature " << temperature;
    }
  }
}

// A narrowed wavefront (Visibility) cannot be built from rasters in the graph: it steps eagerly.
TEST(ZipArGraphsTest, ANarrowedWavefrontStepsEagerly) {
  const auto emulated = testing::EmulatedSynthFamily();
  ASSERT_NE(emulated, nullptr);
  auto pools = testing::SynthPools(*emulated, 1);
  ASSERT_NE(pools, nullptr);
  auto config = DefaultMethodConfig("zipar", *emulated);
  ASSERT_OK(config);
  config->zipar.visible = [](int64_t, int64_t) { return true; };
  const DecodeRequest request = testing::SynthRequest({"zipar", 0, 0.0}, *emulated);
  auto reservation = testing::ReserveFor(*pools, *emulated, "zipar", request);
  ASSERT_NE(reservation, nullptr);
  const ZipArGraphs* graphs = pools->zipar_graphs(*emulated->target);
  ASSERT_NE(graphs, nullptr);
  const int64_t before = graphs->counts().replays;
  auto result = testing::DecodeConfig(*config, *emulated, request, nullptr, reservation.get());
  ASSERT_OK(result);
  EXPECT_EQ(graphs->counts().replays, before);
  EXPECT_GT(result->stats.verify_steps, 0);
}

// A replay that does not read leaves its draws on the device: the graphs' tokens row of the
// request's slot holds them, and a next forward that names their rasters as sources feeds them
// without the host knowing the ids, drawing what the same forward with the ids draws. A call
// with an unknown id and no source in the grid, or with predicts that do not match its draws,
// is refused before anything runs.
TEST(ZipArGraphsTest, DrawsLeftOnTheDeviceFeedTheNextForward) {
  const auto emulated = testing::EmulatedSynthFamily();
  ASSERT_NE(emulated, nullptr);
  const std::optional<RowGraphs::Model> steps = emulated->target->StepGraphModel();
  ASSERT_TRUE(steps.has_value());
  // Two requests' slots of one span (a few keys: quick to capture).
  auto pool = KvPool::Make(emulated->target->NewCache(1, 1), 4, ForwardGraphs::kSpanRows,
                           /*scratch_slot=*/true);
  ASSERT_OK(pool);
  auto captured = ZipArGraphs::Capture(**pool, emulated->target->grid_size(), *steps);
  ASSERT_OK(captured);
  const ZipArGraphs* graphs = captured->get();
  std::optional<KvCache> host = (*pool)->CacheOver((*pool)->Take(2), 2);
  std::optional<KvCache> device = (*pool)->CacheOver((*pool)->Take(2), 2);
  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.cfg_scale = 2.0;
  // Raster 0 fed (no condition: the graphs do not care), predicting raster 1.
  ZipArGraphs::Call first;
  first.tokens = {5};
  first.rasters = {0};
  first.placeholders = {false};
  first.draws = {0};
  first.predicts = {1};
  first.sampling = greedy;
  first.cache = &*host;
  auto read = graphs->Run({first});
  ASSERT_OK(read);
  ASSERT_EQ((*read)[0].drawn.size(), 1u);
  const int64_t drawn = (*read)[0].drawn[0];
  first.cache = &*device;
  first.read = false;
  auto unread = graphs->Run({first});
  ASSERT_OK(unread);
  EXPECT_TRUE((*unread)[0].drawn.empty()) << "not read";
  EXPECT_EQ(graphs->Tokens(*device)[1].item<int64_t>(), drawn) << "left on the device";
  // Raster 1 fed: by its id, or by its source only.
  ZipArGraphs::Call second = first;
  second.tokens = {drawn};
  second.rasters = {1};
  second.sources = {1};
  second.predicts = {2};
  second.cached = {0};
  second.read = true;
  second.cache = &*host;
  auto by_id = graphs->Run({second});
  ASSERT_OK(by_id);
  second.cache = &*device;
  second.tokens = {-1};
  ZipArGraphs::Call unknown = second;
  unknown.sources = {};
  EXPECT_EQ(graphs->Run({unknown}).status().code(), StatusCode::kInvalidArgument)
      << "an unknown id needs its source";
  unknown.sources = {graphs->grid() * graphs->grid()};
  EXPECT_EQ(graphs->Run({unknown}).status().code(), StatusCode::kInvalidArgument)
      << "a source in the grid";
  unknown.sources = {-1};
  EXPECT_EQ(graphs->Run({unknown}).status().code(), StatusCode::kInvalidArgument)
      << "an unknown id's source is a raster";
  unknown = second;
  unknown.predicts = {2, 3};
  EXPECT_EQ(graphs->Run({unknown}).status().code(), StatusCode::kInvalidArgument)
      << "a raster per draw";
  auto by_source = graphs->Run({second});
  ASSERT_OK(by_source);
  EXPECT_EQ((*by_source)[0].drawn, (*by_id)[0].drawn);
  EXPECT_EQ(device->length(), host->length());
}

TEST(ZipArGraphsTest, RequestsOfALoopShareTheGraphs) {
  const auto family = testing::EmulatedSynthFamily();
  ASSERT_NE(family, nullptr);
  auto pools = testing::SynthPools(*family, 3);
  ASSERT_NE(pools, nullptr);
  auto config = DefaultMethodConfig("zipar", *family);
  ASSERT_OK(config);
  const ZipArGraphs* graphs = pools->zipar_graphs(*family->target);
  ASSERT_NE(graphs, nullptr);
  std::vector<DecodeRequest> requests = {
      testing::SynthRequest({"zipar", 0, 1.0}, *family),
      testing::SynthRequest({"zipar", 1, 0.0}, *family),
      testing::SynthRequest({"zipar", 2, 0.7}, *family)};
  requests[2].sampling.top_p = 0.8;  // the batch replays the filtered copy
  auto alone = testing::DecodeEachAlone(*config, *family, *pools, requests);
  ASSERT_OK(alone);
  const PoolGraphs::Counts before = graphs->counts();
  auto looped = testing::DecodeInOneLoop(*config, *family, *pools, requests);
  ASSERT_OK(looped);
  int64_t steps = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ((*looped)[i].tokens, (*alone)[i]) << "request " << i;
    steps += (*looped)[i].stats.verify_steps;
  }
  const PoolGraphs::Counts after = graphs->counts();
  EXPECT_EQ(after.calls - before.calls, steps) << "every forward from the graphs";
  EXPECT_LT(after.replays - before.replays, steps) << "requests share replays";
  std::cout << steps << " forwards in " << after.replays - before.replays << " replays\n";
}

// The chains a ZipAR drafter plans (zipar_chain_rows.h), which its pool captures: with the
// drafter's grid width as the window each step is one row of one-token forwards (row 0's first
// token comes from the restart: 7 forwards; a later row's first from the row above's last: 8),
// every chain is at most a row's worth of forwards of rows buckets, and none without rows.
TEST(ZipArChainRowsTest, ChainsAreTheWavefrontsStepsInRowsBuckets) {
  const int64_t grid = 8;
  const std::set<std::vector<int64_t>> profiles = ZipArChainRows(grid, 1);
  std::cout << profiles.size() << " chain profiles for an 8 x 8 drafter, one row per step\n";
  EXPECT_EQ(profiles.count(std::vector<int64_t>(7, 1)), 1u);
  EXPECT_EQ(profiles.count(std::vector<int64_t>(8, 1)), 1u);
  // Window 2's second step: rows 2, 3 and 4 open as row 1 grows (a placeholder each).
  EXPECT_EQ(profiles.count({1, 1, 2, 2, 4, 4, 4, 4}), 1u);
  for (const std::vector<int64_t>& chain : profiles) {
    EXPECT_GE(chain.size(), 1u);
    EXPECT_LE(chain.size(), static_cast<size_t>(grid));
    for (int64_t rows : chain) {
      EXPECT_EQ(rows, ZipArGraphs::RowsOf(rows)) << "a bucket";
      EXPECT_LE(rows, ZipArGraphs::RowsOf(grid + 1));
    }
  }
  EXPECT_TRUE(ZipArChainRows(grid, 0).empty());
}

}  // namespace
}  // namespace mulo::engine
