// Speculative decoding follows AR's exact distribution: chi-square of 3000 sampled images of
// the tiny family against an enumeration of the target, while a deliberately broken
// acceptance rule (keep every draft) fails the same test. Its own target because each case
// decodes 3000 images (about 50 s each on a busy core).
#include <gtest/gtest.h>

#include <iostream>

#include "engine/decode/speculative.h"
#include "engine/sampling/rng.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadSd;
using testing::SampleAndCompare;
using testing::SdFixture;

TEST(SpeculativeTest, SampledTokensFollowArsExactDistribution) {
  SdFixture f = LoadSd();
  auto check = SampleAndCompare(f, SpeculativeDecoder({3}), 3000);
  std::cout << "[chi2] exact rule: token 1 " << check.stat1 << " (critical " << check.crit1
            << "), token 2 " << check.stat2 << " (critical " << check.crit2 << ")\n";
  EXPECT_LT(check.stat1, check.crit1);
  EXPECT_LT(check.stat2, check.crit2);
}

TEST(SpeculativeTest, BrokenAcceptanceRuleFailsTheSameTest) {
  SdFixture f = LoadSd();
  SpeculativeOptions broken{3, [](double, double, Rng& rng) {
                              rng.Uniform();
                              return true;  // keeps every draft: the output follows q, not p
                            }};
  auto check = SampleAndCompare(f, SpeculativeDecoder(broken), 3000);
  std::cout << "[chi2] accept-all rule: token 1 " << check.stat1 << " (critical " << check.crit1
            << "), token 2 " << check.stat2 << " (critical " << check.crit2 << ")\n";
  EXPECT_TRUE(check.stat1 > check.crit1 || check.stat2 > check.crit2);
}

}  // namespace
}  // namespace mulo::engine
