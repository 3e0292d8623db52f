// The maximal coupling (maximal_coupling.h): the coupled tokens are distributed as p whatever
// q is (chi-square over 200,000 rows), they keep x with probability 1 - TV(p, q), a residual
// other than norm(max(p - q, 0)) or a keep ratio turned over breaks the distribution (the
// controls), and rows left uncoupled draw from p as DrawRows does.
#include "engine/sampling/maximal_coupling.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/sampling/row_sampler.h"

namespace mulo::engine {
namespace {

constexpr int64_t kRows = 200000;

struct Case {
  torch::Tensor p, q, x, keep_numbers, draw_numbers;
};

Case MakeCase() {
  at::manual_seed(7);
  Case c;
  const torch::Tensor p_row = torch::tensor({0.30, 0.05, 0.20, 0.01, 0.14, 0.10, 0.15, 0.05});
  const torch::Tensor q_row = torch::tensor({0.10, 0.25, 0.20, 0.15, 0.04, 0.10, 0.06, 0.10});
  c.p = p_row.to(torch::kFloat32).expand({kRows, 8}).contiguous();
  c.q = q_row.to(torch::kFloat32).expand({kRows, 8}).contiguous();
  c.x = DrawRows(c.q, torch::rand({kRows}, torch::kFloat64));
  c.keep_numbers = torch::rand({kRows}, torch::kFloat64);
  c.draw_numbers = torch::rand({kRows}, torch::kFloat64);
  return c;
}

// Pearson's statistic of `tokens` against the distribution `probs` [V].
double ChiSquare(const torch::Tensor& tokens, const torch::Tensor& probs) {
  const torch::Tensor counts = torch::bincount(tokens, {}, probs.size(0)).to(torch::kFloat64);
  const torch::Tensor expected = probs.to(torch::kFloat64) * static_cast<double>(tokens.size(0));
  return ((counts - expected).pow(2) / expected).sum().item<double>();
}

// 99.9% quantile of chi-square with 7 degrees of freedom.
constexpr double kCritical = 24.32;

TEST(MaximalCouplingTest, TokensFollowPAndKeepXWithOneMinusTotalVariation) {
  const Case c = MakeCase();
  const CoupledDraws out = CoupleRows(c.p, c.x, KeepProbabilities(c.p, c.q, c.x),
                                      ResidualRows(c.p, c.q), c.keep_numbers, c.draw_numbers);
  EXPECT_LT(ChiSquare(out.tokens, c.p[0]), kCritical);
  // Sanity of the setup: x itself follows q, not p.
  EXPECT_GT(ChiSquare(c.x, c.p[0]), kCritical);
  const double tv = 0.5 * (c.p[0] - c.q[0]).abs().sum().item<double>();
  const double kept = out.kept.to(torch::kFloat64).mean().item<double>();
  const double sigma = std::sqrt((1 - tv) * tv / kRows);
  EXPECT_NEAR(kept, 1 - tv, 5 * sigma) << "tv " << tv;
  EXPECT_TRUE(torch::equal(torch::where(out.kept, c.x, out.tokens), out.tokens));
}

TEST(MaximalCouplingTest, AResidualOtherThanTheExcessBreaksTheDistribution) {
  const Case c = MakeCase();
  const CoupledDraws broken = CoupleRows(c.p, c.x, KeepProbabilities(c.p, c.q, c.x), c.p,
                                         c.keep_numbers, c.draw_numbers);
  EXPECT_GT(ChiSquare(broken.tokens, c.p[0]), kCritical);
  // And a keep ratio turned over.
  const CoupledDraws inverted =
      CoupleRows(c.p, c.x, KeepProbabilities(c.q, c.p, c.x), ResidualRows(c.p, c.q),
                 c.keep_numbers, c.draw_numbers);
  EXPECT_GT(ChiSquare(inverted.tokens, c.p[0]), kCritical);
}

TEST(MaximalCouplingTest, EqualDistributionsKeepEveryToken) {
  const Case c = MakeCase();
  const CoupledDraws same = CoupleRows(c.q, c.x, KeepProbabilities(c.q, c.q, c.x),
                                       ResidualRows(c.q, c.q), c.keep_numbers, c.draw_numbers);
  EXPECT_TRUE(same.kept.all().item<bool>());
  EXPECT_TRUE(torch::equal(same.tokens, c.x));
  // The residual of equal rows falls back to p without dividing by zero.
  EXPECT_TRUE(torch::allclose(ResidualRows(c.q, c.q), c.q));
}

TEST(MaximalCouplingTest, UncoupledRowsDrawFromPAsDrawRows) {
  const Case c = MakeCase();
  const torch::Tensor none = torch::zeros({kRows}, torch::kBool);
  const CoupledDraws out = CoupleRows(c.p, c.x, KeepProbabilities(c.p, c.q, c.x),
                                      ResidualRows(c.p, c.q), c.keep_numbers, c.draw_numbers, none);
  EXPECT_FALSE(out.kept.any().item<bool>());
  EXPECT_TRUE(torch::equal(out.tokens, DrawRows(c.p, c.draw_numbers)));
}

}  // namespace
}  // namespace mulo::engine
