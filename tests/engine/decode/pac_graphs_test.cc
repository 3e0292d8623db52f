// SJD-PAC's steps over the pools with (emulated) graphs (issue 61): one replay of the target's
// tree verify graphs of its window (tree_verify_graphs.h, Shape::jacobi) makes the window's
// tree, scores and judges it, keeps the path's cache rows and draws the next window with its
// extra candidates (tree_jacobi_update.h), read once. A request decodes the eager step's tokens
// (greedy exactly, and ar's; sampled up to a rounding flip, as the other graphs' tests allow)
// with every step in one replay and one read, the image's last windows (padded) included.
#include <iostream>
#include <string>
#include <vector>

#include "engine/decode/graphed_shapes.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/decode/pac_tree.h"
#include "engine/model/model_set.h"
#include "engine/model/tree_verify_graphs.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/pooled_decode.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

// The family's pools for `requests` requests capturing SJD-PAC's graphs for `config`'s window
// and tree.
std::unique_ptr<KvPools> PoolsFor(const ModelSet& family, const MethodConfig& config,
                                  int64_t requests = 1) {
  auto pooled = PoolFamily("synth", family);
  EXPECT_TRUE(pooled.ok()) << pooled.status().ToString();
  if (!pooled.ok()) return nullptr;
  KvPools::GraphedShapes& shapes = pooled->shapes;
  shapes.sjd_pac_window = config.sjd_pac.window;
  shapes.sjd_pac_width = config.sjd_pac.width;
  shapes.sjd_pac_depth = config.sjd_pac.depth;
  shapes.peanut_trees.clear();  // not this test's: fewer graphs to capture
  auto made = KvPools::Make({*std::move(pooled)}, requests);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(*made) : nullptr;
}

// Decodes `prompts` greedy, sampled and sampled with top-k 50 and top-p 0.9 (the graphs'
// filtered copies) with `config` eagerly and from the pools' graphs, and checks the graphs'
// tokens, counts and statistics against the eager step's.
void ExpectEagerTokensFromGraphs(const MethodConfig& config, const std::vector<int>& prompts,
                                 const std::string& label) {
  const ModelSet& plain = testing::SynthFamily();
  const auto emulated = testing::EmulatedSynthFamily();
  ASSERT_NE(emulated, nullptr);
  auto pools = PoolsFor(*emulated, config);
  ASSERT_NE(pools, nullptr);
  const TreeVerifyGraphs* graphs = pools->tree_verify_graphs(
      *emulated->target,
      PacVerifyShape(config.sjd_pac.window, config.sjd_pac.width, config.sjd_pac.depth));
  ASSERT_NE(graphs, nullptr);
  EXPECT_EQ(graphs->counts().failed_captures, 0);
  for (const testing::SamplingSetting& setting : testing::kGraphSettings) {
    const double temperature = setting.temperature;
    int mismatches = 0;
    for (int prompt : prompts) {
      DecodeRequest request = testing::SynthRequest({"sjd_pac", prompt, temperature}, plain);
      request.sampling.top_k = setting.top_k;
      request.sampling.top_p = setting.top_p;
      const int64_t replays_before = graphs->counts().replays;
      auto both = testing::DecodeEagerAndPooled(config, plain, *emulated, *pools, request);
      ASSERT_OK(both);
      const DecodeResult &eager = both->eager, &graphed = both->pooled;
      const Stats& stats = graphed.stats;
      const int64_t steps = stats.verify_steps;
      const int64_t replays = graphs->counts().replays - replays_before;
      std::cout << "[" << label << "] temperature " << temperature << ", top_k " << setting.top_k
                << ", top_p " << setting.top_p << ", prompt " << prompt << ": " << replays
                << " steps in graphs; " << testing::StepCounts(stats) << "\n";
      ASSERT_GT(steps, 0);
      EXPECT_EQ(replays, steps) << "every step, the padded last windows too";
      EXPECT_LE(stats.host_syncs, steps + 2);
      EXPECT_LE(stats.dispatched_ops, 50 * steps) << "at most 50 operators per step";
      if (graphed.tokens != eager.tokens) {
        ++mismatches;
        std::cout << "[" << label << "] temperature " << temperature << ", prompt " << prompt
                  << ": tokens differ\n";
      } else {
        EXPECT_EQ(steps, eager.stats.verify_steps);
        EXPECT_EQ(stats.accepted_tokens, eager.stats.accepted_tokens);
        EXPECT_EQ(stats.drafted_tokens, eager.stats.drafted_tokens);
        EXPECT_EQ(stats.drafted_tree_width, eager.stats.drafted_tree_width);
        EXPECT_EQ(stats.resampled_tokens, eager.stats.resampled_tokens);
      }
      if (temperature == 0.0) {
        auto ar = testing::GreedyArTokens(plain, prompt);
        ASSERT_OK(ar);
        EXPECT_EQ(graphed.tokens, *ar) << "greedy SJD-PAC is ar, prompt " << prompt;
      }
    }
    EXPECT_LE(mismatches, temperature == 0.0 ? 0 : 1) << label << ", temperature " << temperature;
  }
}

TEST(PacGraphsTest, TheFamilysWindowStepsInOneReplayWithTheEagerStepsTokens) {
  auto config = DefaultMethodConfig("sjd_pac", testing::SynthFamily());
  ASSERT_OK(config);
  ExpectEagerTokensFromGraphs(*config, {0, 1}, "sjd_pac");
}

// A window of two drafts is often kept whole, so the next window branches at one level of
// the graphs' two (the bonus row's extras alone): the graph's nodes below the other extras
// must stay out of the walk, as the eager tree has none.
TEST(PacGraphsTest, AShortWindowKeptWholeBranchesAsTheEagerTree) {
  auto config = DefaultMethodConfig("sjd_pac", testing::SynthFamily());
  ASSERT_OK(config);
  config->sjd_pac.window = 2;
  config->sjd_pac.width = 3;
  ExpectEagerTokensFromGraphs(*config, {2, 3}, "sjd_pac window 2");
}

// Four requests of a loop: the three unfiltered ones verify their windows in shared replays
// (lanes of one forward, each its own Jacobi update; four lanes, the last a pad on the scratch
// slot), the filtered one in the filtered copy. Each keeps the tokens it decodes alone over
// the same pools.
TEST(PacGraphsTest, RequestsOfALoopVerifyTheirWindowsInSharedReplays) {
  auto config = DefaultMethodConfig("sjd_pac", testing::SynthFamily());
  ASSERT_OK(config);
  const auto family = testing::EmulatedSynthFamily();
  ASSERT_NE(family, nullptr);
  auto pools = PoolsFor(*family, *config, 4);
  ASSERT_NE(pools, nullptr);
  const TreeVerifyGraphs* graphs = pools->tree_verify_graphs(
      *family->target,
      PacVerifyShape(config->sjd_pac.window, config->sjd_pac.width, config->sjd_pac.depth));
  ASSERT_NE(graphs, nullptr);
  EXPECT_EQ(graphs->max_requests(), 4);
  std::vector<DecodeRequest> requests = {testing::SynthRequest({"sjd_pac", 0, 1.0}, *family),
                                         testing::SynthRequest({"sjd_pac", 1, 1.0}, *family),
                                         testing::SynthRequest({"sjd_pac", 2, 0.7}, *family),
                                         testing::SynthRequest({"sjd_pac", 3, 1.0}, *family)};
  requests[3].sampling.top_k = 50;
  requests[3].sampling.top_p = 0.9;
  auto alone = testing::DecodeEachAlone(*config, *family, *pools, requests);
  ASSERT_OK(alone);
  const PoolGraphs::Counts before = graphs->counts();
  auto looped = testing::DecodeInOneLoop(*config, *family, *pools, requests);
  ASSERT_OK(looped);
  const PoolGraphs::Counts after = graphs->counts();
  int64_t steps = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ((*looped)[i].tokens, (*alone)[i]) << "request " << i;
    steps += (*looped)[i].stats.verify_steps;
  }
  EXPECT_EQ(after.calls - before.calls, steps) << "every window verified in the graphs";
  // While in step, a round's four windows take two replays (three lanes and a pad, and the
  // filtered one).
  const int64_t replays = after.replays - before.replays, calls = after.calls - before.calls;
  EXPECT_LT(replays * 4, calls * 3) << replays << " replays for " << calls << " windows";
}

}  // namespace
}  // namespace mulo::engine
