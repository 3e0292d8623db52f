// MC-SJD is lossless: greedy tokens equal AR's for every window and initialisation; sampled
// tokens follow AR's exact distribution (chi-square against an enumeration of the target),
// while the same loop whose coupling keeps a draft with min(1, q/p) instead of min(1, p/q)
// fails the same test. Coupling 0 is SJD token for token (the paper's
// ablation weight), and coupling keeps more drafts than SJD's independent re-draws.
#include "engine/decode/mc_sjd.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "engine/decode/ar.h"
#include "engine/sampling/maximal_coupling.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadSd;
using testing::RunMethod;
using testing::SampleAndCompare;
using testing::Sampling;
using testing::SdFixture;

// Images per distribution test, as SJD's (sjd_test.cc): only carried drafts differ from a
// one-hot q, so a broken coupling's bias is confined to them.
constexpr int kRuns = 6000;

McSjdOptions Coupled(int64_t window, JacobiInit init, double coupling = 1.0) {
  McSjdOptions o;
  o.window = window;
  o.init = init;
  o.coupling = coupling;
  return o;
}

SjdOptions Jacobi(int64_t window, JacobiInit init) {
  SjdOptions o;
  o.window = window;
  o.init = init;
  return o;
}

TEST(McSjdTest, GreedyEqualsArGreedyForEveryWindowAndInit) {
  SdFixture f = LoadSd();
  for (double cfg : {1.0, 4.0}) {
    auto ar = RunMethod(ArDecoder(), f, Sampling(0.0, cfg, 0));
    ASSERT_OK(ar);
    for (JacobiInit init : {JacobiInit::kRandom, JacobiInit::kRepeatHorizon}) {
      for (int64_t window : {1, 2, 5, 16, 64}) {
        auto mc = RunMethod(McSjdDecoder(Coupled(window, init)), f, Sampling(0.0, cfg, 1));
        ASSERT_OK(mc);
        EXPECT_EQ(mc->tokens, ar->tokens) << "window " << window << " cfg " << cfg;
        EXPECT_EQ(mc->stats.target_forward_passes, 1 + mc->stats.verify_steps);
        EXPECT_LE(mc->stats.target_forward_passes, ar->stats.target_forward_passes);
      }
    }
  }
}

TEST(McSjdTest, CouplingZeroIsSjdTokenForToken) {
  SdFixture f = LoadSd();
  for (int64_t window : {2, 5, 16}) {
    for (JacobiInit init : {JacobiInit::kRandom, JacobiInit::kRepeatHorizon}) {
      for (uint64_t seed = 0; seed < 6; ++seed) {
        const SamplingParams s = Sampling(1.0, 2.0, seed);
        auto sjd = RunMethod(SjdDecoder(Jacobi(window, init)), f, s);
        auto mc = RunMethod(McSjdDecoder(Coupled(window, init, 0.0)), f, s);
        ASSERT_OK(sjd);
        ASSERT_OK(mc);
        EXPECT_EQ(mc->tokens, sjd->tokens) << "window " << window << " seed " << seed;
        EXPECT_EQ(mc->stats.accepted_tokens, sjd->stats.accepted_tokens);
        EXPECT_EQ(mc->stats.verify_steps, sjd->stats.verify_steps);
      }
    }
  }
}

TEST(McSjdTest, CouplingKeepsDraftsSjdWouldRedraw) {
  // Same prompts and seeds: coupled drafts settle, so more are accepted and fewer forwards
  // decode the image (40 images each; on this family SJD accepts about 10% fewer).
  SdFixture f = LoadSd();
  int64_t sjd_accepted = 0, mc_accepted = 0, sjd_forwards = 0, mc_forwards = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const SamplingParams s = Sampling(1.0, 2.0, seed);
    auto sjd = RunMethod(SjdDecoder(Jacobi(8, JacobiInit::kRandom)), f, s);
    auto mc = RunMethod(McSjdDecoder(Coupled(8, JacobiInit::kRandom)), f, s);
    ASSERT_OK(sjd);
    ASSERT_OK(mc);
    sjd_accepted += sjd->stats.accepted_tokens;
    mc_accepted += mc->stats.accepted_tokens;
    sjd_forwards += sjd->stats.target_forward_passes;
    mc_forwards += mc->stats.target_forward_passes;
  }
  std::cout << "[mc_sjd] accepted " << mc_accepted << " vs sjd " << sjd_accepted
            << "; target forwards " << mc_forwards << " vs " << sjd_forwards << "\n";
  EXPECT_GT(mc_accepted, sjd_accepted);
  EXPECT_LT(mc_forwards, sjd_forwards);
}

TEST(McSjdTest, SampledTokensFollowArsExactDistribution) {
  SdFixture f = LoadSd();
  auto check = SampleAndCompare(f, McSjdDecoder(Coupled(3, JacobiInit::kRandom)), kRuns);
  std::cout << "[chi2] mc_sjd: token 1 " << check.stat1 << " (critical " << check.crit1
            << "), token 2 " << check.stat2 << " (critical " << check.crit2 << ")\n";
  EXPECT_LT(check.stat1, check.crit1);
  EXPECT_LT(check.stat2, check.crit2);
}

TEST(McSjdTest, InvertingTheKeepRatioFailsTheSameTest) {
  // The coupling keeps x with min(1, p/q); with the ratio turned over, min(1, q/p), a draft
  // from a one-hot q (a random initial token) is always kept, so drafts are no longer
  // distributed as the q = p the verifier assumes.
  SdFixture f = LoadSd();
  McSjdOptions broken = Coupled(3, JacobiInit::kRandom);
  broken.coupled_keep = [](const torch::Tensor& p, const torch::Tensor& q,
                           const torch::Tensor& x) { return KeepProbabilities(q, p, x); };
  auto check = SampleAndCompare(f, McSjdDecoder(broken), kRuns);
  std::cout << "[chi2] mc_sjd with the keep ratio inverted: token 1 " << check.stat1
            << " (critical " << check.crit1 << "), token 2 " << check.stat2 << " (critical "
            << check.crit2 << ")\n";
  EXPECT_TRUE(check.stat1 > check.crit1 || check.stat2 > check.crit2);
}

TEST(McSjdTest, OptionsAreValidatedByName) {
  SdFixture f = LoadSd();
  auto bad = RunMethod(McSjdDecoder(Coupled(8, JacobiInit::kRandom, 1.5)), f, SamplingParams());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "mc_sjd.coupling: must be in [0, 1]");
  auto window = RunMethod(McSjdDecoder(Coupled(0, JacobiInit::kRandom)), f, SamplingParams());
  EXPECT_NE(window.status().message().find("mc_sjd.window"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
