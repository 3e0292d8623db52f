// PEANUT's steps over the pools with (emulated) graphs (issue 61). Its trees change depth and
// width from step to step (PeanutShapes), so the pools capture padded drafting graphs for every
// tree its steps may take (PeanutShapes::Reachable; EagleTreeGraphs::CapturePadded: one graph
// per depth, chosen count and power-of-two width, the step's width in the upload) and verify
// graphs for each of their shapes. A request decodes the eager step's tokens (greedy exactly,
// and ar's; sampled up to a rounding flip, as the other graphs' tests allow), nearly every step
// in two replays: a wide deep tree late in the image, past the head slot's rows, grows
// eagerly.
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "engine/decode/dynamic_tree.h"
#include "engine/decode/eagle_tree_graphs.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/decode/peanut_shapes.h"
#include "engine/model/model_set.h"
#include "engine/model/tree_verify_graphs.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/pooled_decode.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

struct Replays {
  int64_t drafts = 0, padded_drafts = 0, verifications = 0;
  int64_t drafted = 0, padded_drafted = 0;  // the trees those drafting replays drew
};

// The replays of every graph a PEANUT tree of `config` may draft or verify from, each set once.
Replays Count(const KvPools& pools, const ModelSet& family, const MethodConfig& config) {
  Replays replays;
  std::set<const EagleTreeGraphs*> drafts;
  std::set<const TreeVerifyGraphs*> verifications;
  for (const DynamicTreeOptions& tree :
       PeanutShapes::Reachable(config.peanut.shape, config.peanut.tree)) {
    if (const EagleTreeGraphs* graphs = pools.tree_graphs(*family.eagle, tree)) {
      drafts.insert(graphs);
    }
    TreeVerifyGraphs::Shape key;
    key.nodes = ChosenNodes(tree, family.target->vocab_size());
    key.max_depth = tree.depth + 1;
    if (const TreeVerifyGraphs* graphs = pools.tree_verify_graphs(*family.target, key)) {
      verifications.insert(graphs);
    }
  }
  for (const EagleTreeGraphs* graphs : drafts) {
    EXPECT_EQ(graphs->counts().failed_captures, 0);
    replays.drafts += graphs->counts().replays;
    replays.drafted += graphs->counts().calls;
    if (graphs->padded()) {
      replays.padded_drafts += graphs->counts().replays;
      replays.padded_drafted += graphs->counts().calls;
    }
  }
  for (const TreeVerifyGraphs* graphs : verifications) {
    EXPECT_EQ(graphs->counts().failed_captures, 0);
    replays.verifications += graphs->counts().replays;
  }
  return replays;
}

TEST(PeanutGraphsTest, StepsDraftFromPaddedGraphsWithTheEagerStepsTokens) {
  const ModelSet& plain = testing::SynthFamily();
  const auto emulated = testing::EmulatedSynthFamily();
  ASSERT_NE(emulated, nullptr);
  auto config = DefaultMethodConfig("peanut", plain);
  ASSERT_OK(config);
  auto pools = testing::SynthPools(*emulated, 1);
  ASSERT_NE(pools, nullptr);
  // Every reachable tree has drafting graphs (the family's own or padded).
  int64_t reachable = 0, drafted_from_graphs = 0;
  for (const DynamicTreeOptions& tree :
       PeanutShapes::Reachable(config->peanut.shape, config->peanut.tree)) {
    ++reachable;
    drafted_from_graphs += pools->tree_graphs(*emulated->eagle, tree) != nullptr;
  }
  EXPECT_EQ(drafted_from_graphs, reachable);
  {
    std::set<const EagleTreeGraphs*> padded;
    int64_t padded_graphs = 0;
    for (const DynamicTreeOptions& tree :
         PeanutShapes::Reachable(config->peanut.shape, config->peanut.tree)) {
      const EagleTreeGraphs* graphs = pools->tree_graphs(*emulated->eagle, tree);
      if (graphs != nullptr && graphs->padded() && padded.insert(graphs).second) {
        padded_graphs += graphs->counts().graphs;
      }
    }
    std::cout << "[peanut] " << reachable << " reachable trees; " << padded.size()
              << " padded drafting sets (" << padded_graphs << " graphs) of the pools' "
              << pools->graph_counts().graphs << " graphs\n";
  }
  for (const testing::SamplingSetting& setting : testing::kGraphSettings) {
    const double temperature = setting.temperature;
    int mismatches = 0;
    for (int prompt : {0, 1}) {
      DecodeRequest request = testing::SynthRequest({"peanut", prompt, temperature}, plain);
      request.sampling.top_k = setting.top_k;
      request.sampling.top_p = setting.top_p;
      const Replays before = Count(*pools, *emulated, *config);
      auto both = testing::DecodeEagerAndPooled(*config, plain, *emulated, *pools, request);
      ASSERT_OK(both);
      const DecodeResult &eager = both->eager, &graphed = both->pooled;
      const Replays after = Count(*pools, *emulated, *config);
      const Stats& stats = graphed.stats;
      const int64_t steps = stats.verify_steps;
      const int64_t drafts = after.drafts - before.drafts;
      const int64_t verifications = after.verifications - before.verifications;
      std::cout << "[peanut] temperature " << temperature << ", top_k " << setting.top_k
                << ", prompt " << prompt << ": "
                << drafts << " drafted from graphs ("
                << after.padded_drafts - before.padded_drafts << " padded), " << verifications
                << " verified in graphs; " << testing::StepCounts(stats) << "\n";
      ASSERT_GT(steps, 0);
      EXPECT_GE(drafts, steps * 9 / 10);
      EXPECT_GT(after.padded_drafts, before.padded_drafts);
      EXPECT_GE(verifications, steps * 9 / 10);
      EXPECT_LE(stats.host_syncs, steps + 2);
      // Issue 61's bound, the prefill's and the few eager steps' included.
      EXPECT_LE(stats.dispatched_ops, 50 * steps) << "at most 50 operators per step";
      EXPECT_EQ(stats.draft_forward_passes, eager.stats.draft_forward_passes);
      if (graphed.tokens != eager.tokens) {
        ++mismatches;
        std::cout << "[peanut] temperature " << temperature << ", prompt " << prompt
                  << ": tokens differ\n";
      } else {
        EXPECT_EQ(stats.accepted_tokens, eager.stats.accepted_tokens);
        EXPECT_EQ(stats.drafted_tokens, eager.stats.drafted_tokens);
        EXPECT_EQ(stats.drafted_tree_width, eager.stats.drafted_tree_width);
      }
      if (temperature == 0.0) {
        auto ar = testing::GreedyArTokens(plain, prompt);
        ASSERT_OK(ar);
        EXPECT_EQ(graphed.tokens, *ar) << "greedy PEANUT is ar, prompt " << prompt;
      }
    }
    EXPECT_LE(mismatches, temperature == 0.0 ? 0 : 1) << "temperature " << temperature;
  }
}

// Three PEANUT requests of one engine loop draft their trees in shared replays of the padded
// graphs whenever their trees have one depth and chosen count: each lane's width rides in the
// upload, so trees that differ in width grow in one replay, one head forward per depth for all.
// Each request keeps the tokens it decodes alone over the same pools.
TEST(PeanutGraphsTest, RequestsOfALoopDraftTheirTreesInSharedReplays) {
  const auto family = testing::EmulatedSynthFamily();
  ASSERT_NE(family, nullptr);
  auto config = DefaultMethodConfig("peanut", *family);
  ASSERT_OK(config);
  auto pools = testing::SynthPools(*family, 3);
  ASSERT_NE(pools, nullptr);
  const std::vector<DecodeRequest> requests = {testing::SynthRequest({"peanut", 0, 0.0}, *family),
                                               testing::SynthRequest({"peanut", 1, 1.0}, *family),
                                               testing::SynthRequest({"peanut", 2, 0.7}, *family)};
  auto alone = testing::DecodeEachAlone(*config, *family, *pools, requests);
  ASSERT_OK(alone);
  const Replays before = Count(*pools, *family, *config);
  auto looped = testing::DecodeInOneLoop(*config, *family, *pools, requests);
  ASSERT_OK(looped);
  const Replays after = Count(*pools, *family, *config);
  int64_t steps = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ((*looped)[i].tokens, (*alone)[i]) << "request " << i;
    steps += (*looped)[i].stats.verify_steps;
    std::cout << "[peanut] looped request " << i << ": " << testing::StepCounts((*looped)[i].stats)
              << "\n";
  }
  const int64_t drafted = after.drafted - before.drafted;
  const int64_t drafts = after.drafts - before.drafts;
  const int64_t padded = after.padded_drafted - before.padded_drafted;
  const int64_t padded_drafts = after.padded_drafts - before.padded_drafts;
  std::cout << "[peanut] looped: " << drafted << " trees drafted in " << drafts << " replays ("
            << padded << " padded in " << padded_drafts << ") over " << steps << " steps\n";
  EXPECT_GE(drafted, steps * 9 / 10);
  // Shared replays, the padded ones (each lane its own width) among them. Only trees of one
  // depth and chosen count share a set, and PEANUT's change with each request's neighbours:
  // measured 259 trees in 218 replays (236 padded in 198), so the bound is loose.
  EXPECT_LT(drafts * 10, drafted * 9) << drafts << " replays for " << drafted << " trees";
  EXPECT_LT(padded_drafts, padded) << padded_drafts << " padded replays for " << padded;
}

}  // namespace
}  // namespace mulo::engine
