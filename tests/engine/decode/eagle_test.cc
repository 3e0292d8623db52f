// EAGLE-1 (static tree) and EAGLE-2 (dynamic tree) are lossless on the sd_tiny family: greedy
// tokens equal AR greedy for several tree shapes, sampled tokens follow AR's exact
// distribution (chi-square against the enumerated target) while a broken acceptance rule
// fails the same test; options are validated by name; counters add up.
#include "engine/decode/eagle.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "engine/decode/ar.h"
#include "engine/sampling/speculative_acceptance.h"
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

// EAGLE-2's one-read step (the tree verified on the device, tree_rejection.h) makes the host
// walk's decisions: the same tokens and counters as the host step, which any custom rule
// selects (here the exact rule itself, wrapped), in one host read per step instead of two.
TEST(EagleTest, TheDeviceStepMakesTheHostStepsDecisions) {
  SdFixture f = LoadSd();
  int64_t resampled = 0;
  for (const EagleOptions& device : {Dynamic(60, 7, 10), Dynamic(16, 3, 4), Dynamic(3, 1, 3)}) {
    EagleOptions host = device;
    host.accept = [](double p_x, double q_x, Rng& rng) { return AcceptDraft(p_x, q_x, rng); };
    for (double temperature : {0.0, 1.0}) {
      for (uint64_t seed = 1; seed <= 6; ++seed) {
        SamplingParams s;
        s.temperature = temperature;
        s.cfg_scale = 2.0;
        s.seed = seed;
        // Filtered distributions too: p with zeros, trees with children of no mass.
        if (temperature > 0 && seed % 3 == 1) s.top_k = 3;
        if (temperature > 0 && seed % 3 == 2) s.top_p = 0.8;
        auto on_device = RunMethod(EagleDecoder(device), f, s);
        auto on_host = RunMethod(EagleDecoder(host), f, s);
        ASSERT_OK(on_device);
        ASSERT_OK(on_host);
        const std::string where = "tree " + std::to_string(device.dynamic.total_tokens) +
                                  ", temperature " + std::to_string(temperature) + ", seed " +
                                  std::to_string(seed) + ", top_k " + std::to_string(s.top_k) +
                                  ", top_p " + std::to_string(s.top_p);
        EXPECT_EQ(on_device->tokens, on_host->tokens) << where;
        const Stats& d = on_device->stats;
        const Stats& h = on_host->stats;
        EXPECT_EQ(d.verify_steps, h.verify_steps) << where;
        EXPECT_EQ(d.accepted_tokens, h.accepted_tokens) << where;
        EXPECT_EQ(d.resampled_tokens, h.resampled_tokens) << where;
        EXPECT_EQ(d.drafted_tokens, h.drafted_tokens) << where;
        EXPECT_EQ(d.drafted_tree_depth, h.drafted_tree_depth) << where;
        // One read fewer per step with a tree: it comes back with its verdict (a last step
        // with no room for a tree reads its verdict on either path).
        EXPECT_GE(h.host_syncs - d.host_syncs, h.verify_steps - 1) << where;
        EXPECT_LE(h.host_syncs - d.host_syncs, h.verify_steps) << where;
        resampled += d.resampled_tokens;
      }
    }
  }
  EXPECT_GT(resampled, 0) << "some walks ended in a re-draw";
}

}  // namespace
}  // namespace mulo::engine
