// EAGLE-1 (static tree) and EAGLE-2 (dynamic tree) are lossless on the sd_tiny family: greedy
// tokens equal AR greedy for several tree shapes, sampled tokens follow AR's exact
// distribution (chi-square against the enumerated target) while a broken acceptance rule
// fails the same test; options are validated by name; counters add up.
#include "engine/decode/eagle.h"

#include <gtest/gtest.h>

#include <iostream>

#include "engine/decode/ar.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadSd;
using testing::RunMethod;
using testing::SampleAndCompare;
using testing::SdFixture;

EagleOptions Static() {
  EagleOptions o;
  o.static_tree = true;
  return o;
}

EagleOptions Dynamic(int64_t total_tokens, int64_t depth, int64_t top_k) {
  EagleOptions o;
  o.dynamic = {total_tokens, depth, top_k};
  return o;
}

TEST(EagleTest, GreedyEqualsArGreedyForEveryTreeShape) {
  SdFixture f = LoadSd();
  int64_t accepted = 0;
  for (double cfg : {1.0, 2.0}) {
    SamplingParams greedy;
    greedy.temperature = 0.0;
    greedy.cfg_scale = cfg;
    auto ar = RunMethod(ArDecoder(), f, greedy);
    ASSERT_OK(ar);
    for (const EagleOptions& o : {Static(), Dynamic(60, 7, 10), Dynamic(5, 2, 2),
                                  Dynamic(1, 1, 1), Dynamic(16, 3, 4)}) {
      auto eagle = RunMethod(EagleDecoder(o), f, greedy);
      ASSERT_OK(eagle);
      EXPECT_EQ(eagle->tokens, ar->tokens)
          << "cfg " << cfg << (o.static_tree ? " static" : " dynamic ")
          << o.dynamic.total_tokens;
      const Stats& s = eagle->stats;
      EXPECT_EQ(s.tokens, 16);
      // Every step commits its accepted path plus one token (the last step maybe none).
      EXPECT_GE(s.accepted_tokens + s.verify_steps + 1, 16);
      EXPECT_LE(s.accepted_tokens + s.verify_steps + 1, 16 + 1);
      EXPECT_EQ(s.target_forward_passes, 1 + s.verify_steps);
      // Greedy trees keep their width (ranked by the head's untempered distribution): more
      // than a depth-5 chain per step.
      if (o.static_tree) {
        EXPECT_GT(s.drafted_tokens, 5 * s.verify_steps);
      }
      accepted += s.accepted_tokens;
    }
  }
  EXPECT_GT(accepted, 0);  // paths were kept, not only next tokens drawn
}

// Chi-square of 3000 sampled images against AR's exact marginals; with `broken_rule` every
// first child is kept (the output then follows the head, not the target) and the same test
// must fail. One case per tree shape and rule, so that the target's four shards run one each.
void CheckDistribution(EagleOptions o, bool broken_rule) {
  SdFixture f = LoadSd();
  if (broken_rule) {
    o.accept = [](double, double, Rng& rng) {
      rng.Uniform();
      return true;
    };
  }
  auto check = SampleAndCompare(f, EagleDecoder(o), 3000);
  std::cout << "[chi2] " << (broken_rule ? "accept-all " : "")
            << (o.static_tree ? "static" : "dynamic") << ": token 1 " << check.stat1
            << " (critical " << check.crit1 << "), token 2 " << check.stat2 << " (critical "
            << check.crit2 << ")\n";
  if (broken_rule) {
    EXPECT_TRUE(check.stat1 > check.crit1 || check.stat2 > check.crit2);
  } else {
    EXPECT_LT(check.stat1, check.crit1);
    EXPECT_LT(check.stat2, check.crit2);
  }
}

TEST(EagleTest, StaticTreeFollowsArsExactDistribution) { CheckDistribution(Static(), false); }

TEST(EagleTest, DynamicTreeFollowsArsExactDistribution) {
  CheckDistribution(Dynamic(8, 3, 3), false);
}

TEST(EagleTest, StaticTreeWithABrokenRuleFailsTheSameTest) { CheckDistribution(Static(), true); }

TEST(EagleTest, DynamicTreeWithABrokenRuleFailsTheSameTest) {
  CheckDistribution(Dynamic(8, 3, 3), true);
}

TEST(EagleTest, OptionsAndComponentsAreChecked) {
  SdFixture f = LoadSd();
  for (const auto& [o, field] : std::vector<std::pair<EagleOptions, std::string>>{
           {Dynamic(0, 7, 10), "eagle.total_tokens"},
           {Dynamic(60, 33, 10), "eagle.depth"},
           {Dynamic(60, 7, 65), "eagle.top_k"}}) {
    auto r = RunMethod(EagleDecoder(o), f, SamplingParams());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind(field + ":", 0), 0u) << r.status().message();
  }
  f.models.eagle = nullptr;
  EXPECT_EQ(RunMethod(EagleDecoder(), f, SamplingParams()).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace mulo::engine
