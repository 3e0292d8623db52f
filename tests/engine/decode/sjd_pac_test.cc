// SJD-PAC is lossless: greedy tokens equal AR's for every window, width and depth; sampled
// tokens follow AR's exact distribution (chi-square against an enumeration of the target),
// while the same tree whose extra candidates are judged as uniform initial tokens fails the
// same test. Width 1 (or
// depth 1) is MC-SJD token for token and, with coupling 0, SJD; the tree keeps tokens where
// MC-SJD's chain is rejected, so fewer forwards decode the image.
#include "engine/decode/sjd_pac.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "engine/decode/ar.h"
#include "engine/decode/method_registry.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadSd;
using testing::RunMethod;
using testing::SampleAndCompare;
using testing::Sampling;
using testing::SdFixture;

// Images per distribution test, as SJD's and MC-SJD's.
constexpr int kRuns = 6000;

SjdPacOptions Pac(int64_t window, int64_t width, int64_t depth, double coupling = 1.0,
                  JacobiInit init = JacobiInit::kRandom) {
  SjdPacOptions o;
  o.window = window;
  o.width = width;
  o.depth = depth;
  o.coupling = coupling;
  o.init = init;
  return o;
}

TEST(SjdPacTest, GreedyEqualsArGreedyForEveryWindowWidthAndDepth) {
  SdFixture f = LoadSd();
  for (double cfg : {1.0, 4.0}) {
    auto ar = RunMethod(ArDecoder(), f, Sampling(0.0, cfg, 0));
    ASSERT_OK(ar);
    for (JacobiInit init : {JacobiInit::kRandom, JacobiInit::kRepeatHorizon}) {
      for (int64_t window : {1, 2, 5, 16, 64}) {
        for (int64_t width : {1, 3}) {
          auto pac = RunMethod(SjdPacDecoder(Pac(window, width, 3, 1.0, init)), f,
                               Sampling(0.0, cfg, 1));
          ASSERT_OK(pac);
          EXPECT_EQ(pac->tokens, ar->tokens) << "window " << window << " width " << width;
          EXPECT_EQ(pac->stats.target_forward_passes, 1 + pac->stats.verify_steps);
          EXPECT_LE(pac->stats.target_forward_passes, ar->stats.target_forward_passes);
        }
      }
    }
  }
}

TEST(SjdPacTest, WidthOneIsMcSjdAndWithoutCouplingSjdTokenForToken) {
  SdFixture f = LoadSd();
  for (int64_t window : {2, 5, 16}) {
    for (JacobiInit init : {JacobiInit::kRandom, JacobiInit::kRepeatHorizon}) {
      for (uint64_t seed = 0; seed < 4; ++seed) {
        const SamplingParams s = Sampling(1.0, 2.0, seed);
        McSjdOptions coupled;
        coupled.window = window;
        coupled.init = init;
        SjdOptions jacobi;
        jacobi.window = window;
        jacobi.init = init;
        auto mc = RunMethod(McSjdDecoder(coupled), f, s);
        auto sjd = RunMethod(SjdDecoder(jacobi), f, s);
        auto narrow = RunMethod(SjdPacDecoder(Pac(window, 1, 3, 1.0, init)), f, s);
        auto shallow = RunMethod(SjdPacDecoder(Pac(window, 4, 1, 1.0, init)), f, s);
        auto uncoupled = RunMethod(SjdPacDecoder(Pac(window, 1, 3, 0.0, init)), f, s);
        ASSERT_OK(mc);
        ASSERT_OK(sjd);
        ASSERT_OK(narrow);
        ASSERT_OK(shallow);
        ASSERT_OK(uncoupled);
        EXPECT_EQ(narrow->tokens, mc->tokens) << "window " << window << " seed " << seed;
        EXPECT_EQ(shallow->tokens, mc->tokens) << "window " << window << " seed " << seed;
        EXPECT_EQ(uncoupled->tokens, sjd->tokens) << "window " << window << " seed " << seed;
        EXPECT_EQ(narrow->stats.verify_steps, mc->stats.verify_steps);
        EXPECT_EQ(narrow->stats.accepted_tokens, mc->stats.accepted_tokens);
        EXPECT_EQ(uncoupled->stats.verify_steps, sjd->stats.verify_steps);
      }
    }
  }
}

TEST(SjdPacTest, TheTreeKeepsTokensTheChainRejects) {
  // Same seeds: where the carried draft is rejected a sibling may be kept, so fewer forwards
  // decode the image than MC-SJD's chain needs (40 images each).
  SdFixture f = LoadSd();
  int64_t mc_forwards = 0, pac_forwards = 0, pac_drafted = 0, mc_drafted = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const SamplingParams s = Sampling(1.0, 2.0, seed);
    auto mc = RunMethod(SjdPacDecoder(Pac(8, 1, 3)), f, s);
    auto pac = RunMethod(SjdPacDecoder(Pac(8, 4, 3)), f, s);
    ASSERT_OK(mc);
    ASSERT_OK(pac);
    mc_forwards += mc->stats.target_forward_passes;
    pac_forwards += pac->stats.target_forward_passes;
    mc_drafted += mc->stats.drafted_tokens;
    pac_drafted += pac->stats.drafted_tokens;
  }
  std::cout << "[sjd_pac] target forwards " << pac_forwards << " vs mc_sjd " << mc_forwards
            << "; drafted " << pac_drafted << " vs " << mc_drafted << "\n";
  EXPECT_LT(pac_forwards, mc_forwards);
  EXPECT_GT(pac_drafted, mc_drafted);  // the siblings are drafted (and scored) too
}

TEST(SjdPacTest, SampledTokensFollowArsExactDistribution) {
  SdFixture f = LoadSd();
  auto check = SampleAndCompare(f, SjdPacDecoder(Pac(3, 4, 3)), kRuns);
  std::cout << "[chi2] sjd_pac: token 1 " << check.stat1 << " (critical " << check.crit1
            << "), token 2 " << check.stat2 << " (critical " << check.crit2 << ")\n";
  EXPECT_LT(check.stat1, check.crit1);
  EXPECT_LT(check.stat2, check.crit2);
}

TEST(SjdPacTest, JudgingSiblingsAsUniformPadTokensFailsTheSameTest) {
  // Candidate k is drawn from q with candidates 0..k-1 removed; judging it as a token drawn
  // uniformly (the q the authors' code gives its new window positions) keeps it with
  // min(1, V p'(x)), nearly always, so token 2 leans towards the stale q.
  SdFixture f = LoadSd();
  SjdPacOptions broken = Pac(3, 4, 3);
  broken.sibling_q = [](const torch::Tensor& exact, const torch::Tensor&) {
    return torch::full_like(exact, 1.0 / static_cast<double>(exact.size(2)));
  };
  auto check = SampleAndCompare(f, SjdPacDecoder(broken), kRuns);
  std::cout << "[chi2] sjd_pac judging siblings as uniform: token 1 " << check.stat1
            << " (critical " << check.crit1 << "), token 2 " << check.stat2 << " (critical "
            << check.crit2 << ")\n";
  EXPECT_TRUE(check.stat1 > check.crit1 || check.stat2 > check.crit2);
}

TEST(SjdPacTest, OptionsAreValidatedByName) {
  SdFixture f = LoadSd();
  auto coupling = RunMethod(SjdPacDecoder(Pac(8, 4, 3, 1.5)), f, SamplingParams());
  EXPECT_EQ(coupling.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(coupling.status().message(), "sjd_pac.coupling: must be in [0, 1]");
  // Each option's range is its spec's, checked where every caller makes a method.
  MethodConfig config;
  config.name = "sjd_pac";
  config.sjd_pac = Pac(8, 0, 3);
  EXPECT_EQ(MakeMethod(config, f.models).status().message(), "sjd_pac.width: must be in [1, 16]");
  config.sjd_pac = Pac(8, 4, 9);
  EXPECT_EQ(MakeMethod(config, f.models).status().message(), "sjd_pac.depth: must be in [1, 8]");
  // The tree both make is the decoder's own rule.
  auto nodes = RunMethod(SjdPacDecoder(Pac(8, 16, 3)), f, SamplingParams());
  EXPECT_EQ(nodes.status().message(),
            "sjd_pac.depth: width 16 and depth 3 make 272 tree nodes; at most 256");
  auto window = RunMethod(SjdPacDecoder(Pac(0, 4, 3)), f, SamplingParams());
  EXPECT_NE(window.status().message().find("sjd_pac.window"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
