// PEANUT on the sd_tiny family: greedy equals ar; sampled tokens follow ar's exact
// distribution (chi-square against the enumerated target) while an accept-all rule fails the
// same test; with the adaptation off (l_d = l_k = 0) it is EAGLE-2 token for token; with it on
// the trees change shape; PEANUT + LANTERN counts its relaxed accepts; options are validated
// by name.
#include "engine/decode/peanut.h"

#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/decode/ar.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadSd;
using testing::RunMethod;
using testing::SampleAndCompare;
using testing::SdFixture;
using testing::Sampling;

// sd_tiny's grid holds at most 15 drafted positions: a small initial tree and small bounds.
PeanutMethodOptions Small(PeanutInit init = PeanutInit::kHorizontalRepeat) {
  PeanutMethodOptions o;
  o.tree = {8, 2, 3};
  o.shape.max_depth = 5;
  o.shape.min_top_k = 1;
  o.shape.max_top_k = 6;
  o.shape.l_k = 2;
  o.shape.init = init;
  return o;
}

TEST(PeanutTest, GreedyEqualsArGreedyForEveryInitialisation) {
  SdFixture f = LoadSd();
  for (double cfg : {1.0, 4.0}) {
    auto ar = RunMethod(ArDecoder(), f, Sampling(0.0, cfg, 0));
    ASSERT_OK(ar);
    for (PeanutInit init :
         {PeanutInit::kHorizontalRepeat, PeanutInit::kVerticalRepeat, PeanutInit::kRandom}) {
      for (uint64_t seed : {0, 1}) {
        auto peanut = RunMethod(PeanutDecoder(Small(init)), f, Sampling(0.0, cfg, seed));
        ASSERT_OK(peanut);
        EXPECT_EQ(peanut->tokens, ar->tokens) << "cfg " << cfg << " seed " << seed;
        EXPECT_GT(peanut->stats.MeanDraftedTreeDepth(), 0.0);
      }
    }
  }
}

TEST(PeanutTest, NoAdaptationIsEagle2ForTheSameSeeds) {
  SdFixture f = LoadSd();
  PeanutMethodOptions fixed = Small();
  fixed.shape.l_d = 0;
  fixed.shape.l_k = 0;
  EagleOptions eagle2;
  eagle2.dynamic = fixed.tree;
  for (double temperature : {0.0, 1.0}) {
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const SamplingParams s = Sampling(temperature, 2.0, seed);
      auto eagle = RunMethod(EagleDecoder(eagle2), f, s);
      auto peanut = RunMethod(PeanutDecoder(fixed), f, s);
      ASSERT_OK(eagle);
      ASSERT_OK(peanut);
      EXPECT_EQ(peanut->tokens, eagle->tokens) << temperature << " " << seed;
      EXPECT_EQ(peanut->stats.MeanDraftedTreeWidth(), 3.0);
      EXPECT_EQ(peanut->stats.drafted_tree_depth, eagle->stats.drafted_tree_depth);
    }
  }
}

TEST(PeanutTest, AdaptationChangesTheTreesShapes) {
  SdFixture f = LoadSd();
  double depth_fixed = 0, depth_adapted = 0, width_adapted = 0;
  PeanutMethodOptions fixed = Small();
  fixed.shape.l_d = fixed.shape.l_k = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const SamplingParams s = Sampling(1.0, 2.0, seed);
    auto a = RunMethod(PeanutDecoder(fixed), f, s);
    auto b = RunMethod(PeanutDecoder(Small()), f, s);
    ASSERT_OK(a);
    ASSERT_OK(b);
    depth_fixed += a->stats.MeanDraftedTreeDepth();
    depth_adapted += b->stats.MeanDraftedTreeDepth();
    width_adapted += b->stats.MeanDraftedTreeWidth();
  }
  EXPECT_NE(depth_adapted, depth_fixed);
  EXPECT_NE(width_adapted, 30.0);  // 10 images at the fixed width 3
}

TEST(PeanutTest, SampledTokensFollowArsExactDistribution) {
  SdFixture f = LoadSd();
  auto check = SampleAndCompare(f, PeanutDecoder(Small()), 3000);
  std::cout << "[chi2] peanut: token 1 " << check.stat1 << " (critical " << check.crit1
            << "), token 2 " << check.stat2 << " (critical " << check.crit2 << ")\n";
  EXPECT_LT(check.stat1, check.crit1);
  EXPECT_LT(check.stat2, check.crit2);
}

TEST(PeanutTest, BrokenAcceptanceRuleFailsTheSameTest) {
  SdFixture f = LoadSd();
  PeanutMethodOptions broken = Small();
  broken.accept = [](double, double, Rng& rng) {
    rng.Uniform();
    return true;
  };
  auto check = SampleAndCompare(f, PeanutDecoder(broken), 3000);
  std::cout << "[chi2] peanut accept-all: token 1 " << check.stat1 << " (critical "
            << check.crit1 << "), token 2 " << check.stat2 << " (critical " << check.crit2
            << ")\n";
  EXPECT_TRUE(check.stat1 > check.crit1 || check.stat2 > check.crit2);
}

TEST(PeanutTest, WithLanternItKeepsDraftsTheExactRuleRejects) {
  SdFixture f = LoadSd();
  f.models.neighbors = std::make_shared<LatentNeighbors>(
      LatentNeighbors::Build(torch::arange(16, torch::kFloat32).view({16, 1}), 15));
  PeanutMethodOptions relaxed = Small();
  relaxed.lantern_delta = 0.4;
  relaxed.lantern_k = 4;
  int64_t relaxed_accepts = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto r = RunMethod(PeanutDecoder(relaxed), f, Sampling(1.0, 2.0, seed));
    ASSERT_OK(r);
    relaxed_accepts += r->stats.relaxed_accepted_tokens;
  }
  EXPECT_GT(relaxed_accepts, 0);
}

TEST(PeanutTest, OptionsAreValidatedByName) {
  SdFixture f = LoadSd();
  // Small() changed in one option; the error names it.
  const std::vector<std::pair<std::string, std::function<void(PeanutMethodOptions&)>>> bad = {
      {"peanut.beta", [](auto& o) { o.shape.beta = 0; }},
      {"peanut.max_depth:", [](auto& o) { o.shape.max_depth = 1; }},
      {"peanut.min_depth:", [](auto& o) { o.shape.min_depth = 40; }},
      {"peanut.max_top_k:", [](auto& o) { o.shape.max_top_k = 2; }},
      {"peanut.min_top_k:", [](auto& o) { o.shape.min_top_k = 64; }},
      {"peanut.lantern_delta", [](auto& o) { o.lantern_delta = 2; }},
      {"peanut.tree.top_k", [](auto& o) { o.tree.top_k = 0; }},
  };
  for (const auto& [field, mutate] : bad) {
    PeanutMethodOptions o = Small();
    mutate(o);
    auto r = RunMethod(PeanutDecoder(o), f, SamplingParams());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_EQ(r.status().message().rfind(field, 0), 0u) << r.status().message();
  }
}

}  // namespace
}  // namespace mulo::engine
