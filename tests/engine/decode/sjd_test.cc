// SJD is lossless: greedy tokens equal AR's for every window and initialisation; sampled tokens
// follow AR's exact distribution (chi-square against an enumeration of the target), while the
// same loop replacing rejections from p instead of norm(max(p - q, 0)) fails the same test.
// GSD with group_size 1 gives exactly SJD's tokens for the same seeds; with groups on it keeps
// drafts the exact rule would not. Options are validated by name.
#include "engine/decode/sjd.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/decode/ar.h"
#include "engine/decode/gsd.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadSd;
using testing::RunMethod;
using testing::SampleAndCompare;
using testing::SdFixture;
using testing::Sampling;

// Images per distribution test. Only drafts carried from an earlier iteration have a q that
// differs from one-hot, so the broken rule's bias is confined to them: 6000 images make it
// show (a uniform one-hot draft replaced from p is still exact).
constexpr int kRuns = 6000;

SjdOptions Jacobi(int64_t window, JacobiInit init) {
  SjdOptions o;
  o.window = window;
  o.init = init;
  return o;
}

GsdOptions Grouped(int64_t window, int64_t group_size, double max_distance) {
  GsdOptions o;
  o.window = window;
  o.group.size = group_size;
  o.group.max_embedding_distance = max_distance;
  return o;
}

TEST(SjdTest, GreedyEqualsArGreedyForEveryWindowAndInit) {
  SdFixture f = LoadSd();
  for (double cfg : {1.0, 4.0}) {
    auto ar = RunMethod(ArDecoder(), f, Sampling(0.0, cfg, 0));
    ASSERT_OK(ar);
    for (JacobiInit init : {JacobiInit::kRandom, JacobiInit::kRepeatHorizon}) {
      for (int64_t window : {1, 2, 3, 5, 16}) {
        for (uint64_t seed : {0, 1}) {
          auto sjd = RunMethod(SjdDecoder(Jacobi(window, init)), f, Sampling(0.0, cfg, seed));
          ASSERT_OK(sjd);
          EXPECT_EQ(sjd->tokens, ar->tokens) << "window " << window << " cfg " << cfg;
          const Stats& s = sjd->stats;
          EXPECT_EQ(s.target_forward_passes, 1 + s.verify_steps);
          EXPECT_LE(s.target_forward_passes, ar->stats.target_forward_passes);
          // Every iteration commits its accepted drafts plus one drawn token (the last may
          // end the image on a draft).
          EXPECT_GE(s.accepted_tokens + s.verify_steps, 15);
          EXPECT_LE(s.accepted_tokens + s.verify_steps, 16);
          EXPECT_LE(s.resampled_tokens, s.verify_steps);
        }
      }
    }
  }
}

TEST(SjdTest, JacobiIterationsSaveForwardsOnAPredictableImage) {
  // Greedy at a high guidance scale: the carried drafts are the target's own argmaxes, which
  // stay right once their prefix is, so SJD needs fewer forwards than AR's 16.
  SdFixture f = LoadSd();
  auto sjd = RunMethod(SjdDecoder(Jacobi(16, JacobiInit::kRandom)), f, Sampling(0.0, 4.0, 0));
  ASSERT_OK(sjd);
  EXPECT_LT(sjd->stats.target_forward_passes, 16);
  EXPECT_GT(sjd->stats.accepted_tokens, 0);
}

TEST(SjdTest, SampledTokensFollowArsExactDistribution) {
  SdFixture f = LoadSd();
  auto check = SampleAndCompare(f, SjdDecoder(Jacobi(3, JacobiInit::kRandom)), kRuns);
  std::cout << "[chi2] sjd: token 1 " << check.stat1 << " (critical " << check.crit1
            << "), token 2 " << check.stat2 << " (critical " << check.crit2 << ")\n";
  EXPECT_LT(check.stat1, check.crit1);
  EXPECT_LT(check.stat2, check.crit2);
}

TEST(SjdTest, ReplacingRejectionsFromPFailsTheSameTest) {
  SdFixture f = LoadSd();
  SjdOptions broken = Jacobi(3, JacobiInit::kRandom);
  broken.residual = [](const torch::Tensor& p, const torch::Tensor&) { return p; };
  auto check = SampleAndCompare(f, SjdDecoder(broken), kRuns);
  std::cout << "[chi2] sjd without the residual: token 1 " << check.stat1 << " (critical "
            << check.crit1 << "), token 2 " << check.stat2 << " (critical " << check.crit2
            << ")\n";
  EXPECT_TRUE(check.stat1 > check.crit1 || check.stat2 > check.crit2);
}

TEST(GsdTest, GroupSizeOneGivesSjdsTokens) {
  SdFixture f = LoadSd();
  for (double temperature : {0.0, 1.0}) {
    for (int64_t window : {2, 5, 16}) {
      for (uint64_t seed = 0; seed < 8; ++seed) {
        const SamplingParams s = Sampling(temperature, 2.0, seed);
        auto sjd = RunMethod(SjdDecoder(Jacobi(window, JacobiInit::kRandom)), f, s);
        auto gsd = RunMethod(GsdDecoder(Grouped(window, 1, 1e9)), f, s);
        ASSERT_OK(sjd);
        ASSERT_OK(gsd);
        EXPECT_EQ(gsd->tokens, sjd->tokens) << "seed " << seed << " window " << window;
        EXPECT_EQ(gsd->stats.accepted_tokens, sjd->stats.accepted_tokens);
        EXPECT_EQ(gsd->stats.relaxed_accepted_tokens, 0);
        EXPECT_EQ(gsd->stats.pooled_neighbors, 0);
      }
    }
  }
}

TEST(GsdTest, GroupsKeepDraftsTheExactRuleRejects) {
  SdFixture f = LoadSd();
  int64_t sjd_accepted = 0, gsd_accepted = 0, relaxed = 0, pooled = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const SamplingParams s = Sampling(1.0, 2.0, seed);
    auto sjd = RunMethod(SjdDecoder(Jacobi(8, JacobiInit::kRandom)), f, s);
    auto gsd = RunMethod(GsdDecoder(Grouped(8, 14, 1e9)), f, s);
    ASSERT_OK(sjd);
    ASSERT_OK(gsd);
    sjd_accepted += sjd->stats.accepted_tokens;
    gsd_accepted += gsd->stats.accepted_tokens;
    relaxed += gsd->stats.relaxed_accepted_tokens;
    pooled += gsd->stats.pooled_neighbors;
    EXPECT_LE(gsd->stats.relaxed_accepted_tokens, gsd->stats.accepted_tokens);
  }
  EXPECT_GT(relaxed, 0);
  EXPECT_GT(pooled, 0);
  EXPECT_GT(gsd_accepted, sjd_accepted);
  // A distance bound no two embeddings meet pools nothing: SJD's acceptance again.
  auto tight = RunMethod(GsdDecoder(Grouped(8, 14, 0.0)), f, Sampling(1.0, 2.0, 3));
  auto sjd = RunMethod(SjdDecoder(Jacobi(8, JacobiInit::kRandom)), f, Sampling(1.0, 2.0, 3));
  ASSERT_OK(tight);
  ASSERT_OK(sjd);
  EXPECT_EQ(tight->tokens, sjd->tokens);
}

TEST(SjdTest, OptionsAreValidatedByName) {
  SdFixture f = LoadSd();
  auto sjd = RunMethod(SjdDecoder(Jacobi(0, JacobiInit::kRandom)), f, SamplingParams());
  EXPECT_EQ(sjd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sjd.status().message().find("sjd.window"), std::string::npos);
  auto big = RunMethod(SjdDecoder(Jacobi(257, JacobiInit::kRandom)), f, SamplingParams());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  GsdOptions bad = Grouped(16, 0, 0.5);
  auto gsd = RunMethod(GsdDecoder(bad), f, SamplingParams());
  EXPECT_EQ(gsd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(gsd.status().message().find("gsd.group_size"), std::string::npos);
  bad = Grouped(16, 14, -1.0);
  gsd = RunMethod(GsdDecoder(bad), f, SamplingParams());
  EXPECT_NE(gsd.status().message().find("gsd.max_embedding_distance"), std::string::npos);
  bad = Grouped(16, 14, 0.5);
  bad.group.max_probability_gap = 2.0;
  gsd = RunMethod(GsdDecoder(bad), f, SamplingParams());
  EXPECT_NE(gsd.status().message().find("gsd.max_probability_gap"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
