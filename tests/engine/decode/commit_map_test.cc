// The acceptance map (commit_map.h) of every method the synth family serves: one code per image
// token whose totals are the Stats counters (kept drafts per depth, relaxed ones, re-draws,
// the target's own), eagerly and over the pools' (emulated) graphs, where the graphs mark the
// same tokens as the eager step when they decode the same tokens.
#include "engine/decode/commit_map.h"

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine/decode/graphed_shapes.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/pooled_decode.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

// The map's totals per kind.
struct MapTotals {
  int64_t target = 0, redrawn = 0, kept = 0, relaxed = 0;
  std::vector<int64_t> per_depth;
};

MapTotals Totals(const std::vector<uint8_t>& map) {
  MapTotals totals;
  for (uint8_t code : map) {
    if (code == kCommitTarget) {
      ++totals.target;
    } else if (code == kCommitRedrawn) {
      ++totals.redrawn;
    } else {
      ++totals.kept;
      totals.relaxed += (code & kCommitRelaxedBit) != 0;
      const int64_t depth = CommitDepth(code);
      if (static_cast<int64_t>(totals.per_depth.size()) < depth) totals.per_depth.resize(depth, 0);
      ++totals.per_depth[depth - 1];
    }
  }
  return totals;
}

// The map has the image's size and its totals are the Stats counters.
void ExpectMapOfStats(const Stats& stats, int64_t tokens, const std::string& where) {
  ASSERT_EQ(static_cast<int64_t>(stats.commit_map.size()), tokens) << where;
  const MapTotals totals = Totals(stats.commit_map);
  EXPECT_EQ(totals.kept, stats.accepted_tokens) << where;
  EXPECT_EQ(totals.relaxed, stats.relaxed_accepted_tokens) << where;
  EXPECT_EQ(totals.redrawn, stats.resampled_tokens) << where;
  EXPECT_EQ(totals.target, tokens - stats.accepted_tokens - stats.resampled_tokens) << where;
  if (!stats.accepted_per_position.empty()) {  // chain, tree and Jacobi methods
    std::vector<int64_t> expected = stats.accepted_per_position;
    while (!expected.empty() && expected.back() == 0) expected.pop_back();
    EXPECT_EQ(totals.per_depth, expected) << where;
  }
}

TEST(CommitMapTest, EveryMethodsMapCountsItsStats) {
  const ModelSet& family = testing::SynthFamily();
  const int64_t tokens = family.target->grid_size() * family.target->grid_size();
  // Sampled: every kind of token occurs (greedy steps re-draw too, but keep fewer drafts).
  int prompt = 0;
  int64_t redrawn = 0;
  for (const std::string& method : AvailableMethods(family)) {
    const testing::SynthJob job{method, prompt++ % 8, 1.0};
    auto config = DefaultMethodConfig(method, family);
    ASSERT_OK(config);
    auto result = testing::DecodeConfig(*config, family, testing::SynthRequest(job, family));
    ASSERT_OK(result);
    ExpectMapOfStats(result->stats, tokens, method);
    const MapTotals totals = Totals(result->stats.commit_map);
    if (method == "ar" || method == "zipar") {
      EXPECT_EQ(totals.target, tokens) << method << ": every token is the target's own";
    } else {
      EXPECT_GT(totals.kept, 0) << method << ": a drafting method kept no draft";
    }
    redrawn += totals.redrawn;
    std::cout << "[commit_map] " << method << ": " << totals.kept << " kept (" << totals.relaxed
              << " relaxed), " << totals.redrawn << " re-drawn, " << totals.target
              << " the target's own\n";
  }
  EXPECT_GT(redrawn, 0) << "no re-drawn token marked: code 1 went untested";
}

TEST(CommitMapTest, RelaxedMethodsMarkTheirRelaxedDraftsInTheGraphsAsEagerly) {
  // The relaxed rules judged on the device (JudgeChains' flags for GSD's groups,
  // JudgeRelaxedTree's mask for LANTERN's trees) and on the host (MuLo-SD's threshold).
  const ModelSet& plain = testing::SynthFamily();
  const auto emulated = testing::EmulatedSynthFamily();
  ASSERT_NE(emulated, nullptr);
  // The family's pools without the graphs of the methods this test does not run (PEANUT's
  // trees, SJD-PAC's window): fewer to capture.
  auto pooled = PoolFamily("synth", *emulated);
  ASSERT_OK(pooled);
  pooled->shapes.peanut_trees.clear();
  pooled->shapes.sjd_pac_window = 0;
  auto pools = KvPools::Make({*std::move(pooled)}, 1);
  ASSERT_OK(pools);
  const int64_t tokens = plain.target->grid_size() * plain.target->grid_size();
  int64_t relaxed = 0, same_tokens = 0;
  for (const std::string method : {"gsd", "lantern", "mulo"}) {
    auto config = DefaultMethodConfig(method, plain);
    ASSERT_OK(config);
    const std::string where = method;
    const DecodeRequest request = testing::SynthRequest({method, 0, 1.0}, plain);
    auto both = testing::DecodeEagerAndPooled(*config, plain, *emulated, **pools, request);
    ASSERT_OK(both);
    EXPECT_GT(both->pooled.stats.graph_replays, 0) << method << ": the pooled decode replayed none";
    ExpectMapOfStats(both->eager.stats, tokens, where + " eager");
    ExpectMapOfStats(both->pooled.stats, tokens, where + " pooled");
    relaxed += both->pooled.stats.relaxed_accepted_tokens;
    if (both->pooled.tokens == both->eager.tokens) {
      ++same_tokens;
      EXPECT_EQ(both->pooled.stats.commit_map, both->eager.stats.commit_map) << where;
    }
  }
  EXPECT_GT(relaxed, 0) << "no relaxed draft marked: the relaxed codes went untested";
  EXPECT_GE(same_tokens, 2) << "too few decodes to compare the graphs' maps with the eager ones";
}

}  // namespace
}  // namespace mulo::engine
