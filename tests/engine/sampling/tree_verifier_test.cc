// Tree verification (recursive rejection over siblings): the committed tokens follow the
// target's distributions whether the children were drawn without replacement from q (static
// tree) or chosen deterministically (dynamic tree, q = 1), one level and two levels deep; a
// rule that ignores the residual fails the same chi-square test; greedy keeps the path of
// argmaxes.
#include "engine/sampling/tree_verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative_acceptance.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

// 99.9% quantile of chi-square (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double z = 3.090, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

double ChiSquare(const std::vector<int>& counts, const torch::Tensor& p) {
  int n = 0;
  for (int c : counts) n += c;
  double stat = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = n * p[i].item<double>();
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return stat;
}

const torch::Tensor kP = torch::tensor({0.05f, 0.4f, 0.1f, 0.3f, 0.15f});
const torch::Tensor kQ = torch::tensor({0.3f, 0.1f, 0.3f, 0.1f, 0.2f});

// The first committed token of a one-level tree of 3 children drawn from q without
// replacement (each child's q row: q without the earlier children, renormalised).
double StaticTreeChiSquare(const Verifier& verifier, int n) {
  Rng draft(1), accept(2), draw(3);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < n; ++i) {
    DraftBatch d;
    torch::Tensor q = kQ.clone();
    std::vector<torch::Tensor> rows;
    for (int c = 0; c < 3; ++c) {
      rows.push_back(q.clone());
      const int64_t x = SampleFromProbabilities(q, draft);
      d.tokens.push_back(x);
      d.parents.push_back(-1);
      q[x] = 0.0f;
      q /= q.sum();
    }
    d.q = torch::stack(rows);
    // p rows after each (leaf) child are never read for the first token; the root's is last.
    const auto p = torch::stack({kP, kP, kP, kP});
    auto verdict = verifier.Verify({d, p, false}, {&accept, &draw});
    EXPECT_TRUE(verdict.ok());
    counts[verdict->accepted.empty() ? verdict->next_token : d.tokens[verdict->accepted[0]]]++;
  }
  return ChiSquare(counts, kP);
}

TEST(TreeVerifierTest, StaticTreeDrawnWithoutReplacementIsLossless) {
  const double critical = ChiSquareCritical(4);
  EXPECT_LT(StaticTreeChiSquare(TreeVerifier(), 60000), critical);
  // Keeping sampled children with probability p(x), as if they had been chosen
  // deterministically (q = 1): the output is no longer p.
  const double broken = StaticTreeChiSquare(
      TreeVerifier([](double p_x, double, Rng& rng) { return rng.Uniform() < p_x; }), 60000);
  EXPECT_GT(broken, critical);
}

// A deterministic two-level tree: the root's children are tokens 1 and 3; token 1's children
// are 2 and 4. The first token must follow p_root and the second, after token 1, p_after_1.
TEST(TreeVerifierTest, DeterministicTreeIsLosslessAtEveryDepth) {
  const auto p_root = kP;
  const auto p_after_1 = torch::tensor({0.2f, 0.1f, 0.3f, 0.25f, 0.15f});
  DraftBatch d;
  d.tokens = {1, 3, 2, 4};
  d.parents = {-1, -1, 0, 0};
  // Rows: after draft 0 (token 1), after draft 1, after drafts 2 and 3 (leaves), the root.
  const auto p = torch::stack({p_after_1, kQ, kQ, kQ, p_root});
  auto run = [&](const TreeVerifier& verifier, std::vector<int>* first, std::vector<int>* second) {
    Rng accept(5), draw(6);
    for (int i = 0; i < 60000; ++i) {
      auto v = verifier.Verify({d, p, false}, {&accept, &draw});
      ASSERT_TRUE(v.ok());
      std::vector<int64_t> out;
      for (int64_t a : v->accepted) out.push_back(d.tokens[a]);
      out.push_back(v->next_token);
      (*first)[out[0]]++;
      if (out[0] == 1) (*second)[out[1]]++;
    }
  };
  std::vector<int> first(5, 0), second(5, 0);
  run(TreeVerifier(), &first, &second);
  const double critical = ChiSquareCritical(4);
  EXPECT_LT(ChiSquare(first, p_root), critical);
  EXPECT_LT(ChiSquare(second, p_after_1), critical);
  // Keeping a child with probability 2 p(x): drafted tokens are over-represented.
  std::vector<int> broken_first(5, 0), broken_second(5, 0);
  run(TreeVerifier([](double p_x, double, Rng& rng) { return rng.Uniform() < 2 * p_x; }),
      &broken_first, &broken_second);
  EXPECT_GT(ChiSquare(broken_first, p_root), critical);
}

TEST(TreeVerifierTest, GreedyKeepsThePathOfArgmaxes) {
  DraftBatch d;
  d.tokens = {3, 1, 0, 2};
  d.parents = {-1, -1, 1, 1};
  auto one_hot = [](int64_t t) { return torch::one_hot(torch::tensor(t), 5).to(torch::kFloat); };
  // Root argmax 1 (draft 1), then after draft 1 argmax 2 (draft 3), then after it 4.
  const auto p = torch::stack({one_hot(0), one_hot(2), one_hot(0), one_hot(4), one_hot(1)});
  Rng accept(1), draw(2);
  auto v = TreeVerifier().Verify({d, p, true}, {&accept, &draw});
  ASSERT_OK(v);
  EXPECT_EQ(v->accepted, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(v->next_token, 4);
}

// A sampled tree's p and q come to the host in one read (greedy: p alone), and the same tree
// is verified the same way whatever the read's layout.
TEST(TreeVerifierTest, ASampledTreeReadsPAndQOnce) {
  DraftBatch d;
  d.tokens = {1, 2, 0};
  d.parents = {-1, -1, 0};
  d.q = torch::stack({kQ, kQ, kQ});
  const auto p = torch::stack({kP, kP, kP, kP});
  Rng accept(3), draw(4);
  const int64_t before = HostReadCount();
  auto v = TreeVerifier().Verify({d, p, false}, {&accept, &draw});
  ASSERT_OK(v);
  EXPECT_EQ(HostReadCount() - before, 1);
  // The oracle: p and q read separately, as the verifier did before.
  Rng accept2(3), draw2(4);
  const auto host_p = p.to(torch::kFloat64), host_q = d.q.to(torch::kFloat64);
  DraftBatch d2 = d;
  d2.q = host_q;
  auto w = TreeVerifier().Verify({d2, host_p, false}, {&accept2, &draw2});
  ASSERT_OK(w);
  EXPECT_EQ(v->accepted, w->accepted);
  EXPECT_EQ(v->next_token, w->next_token);
  const int64_t greedy_before = HostReadCount();
  ASSERT_OK(TreeVerifier().Verify({d, p, true}, {&accept, &draw}));
  EXPECT_EQ(HostReadCount() - greedy_before, 1);
}

TEST(TreeVerifierTest, RefusesMalformedInput) {
  DraftBatch d;
  d.tokens = {1, 2};
  d.parents = {1, -1};  // a child before its parent
  Rng a(1), b(2);
  const auto p = torch::stack({kP, kP, kP});
  EXPECT_EQ(TreeVerifier().Verify({d, p, false}, {&a, &b}).status().code(),
            StatusCode::kInvalidArgument);
  d.parents = {-1, 0};
  EXPECT_EQ(TreeVerifier().Verify({d, p.narrow(0, 0, 2), false}, {&a, &b}).status().code(),
            StatusCode::kInvalidArgument);
  d.q = kQ.unsqueeze(0);  // one row for two drafts
  EXPECT_EQ(TreeVerifier().Verify({d, p, false}, {&a, &b}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mulo::engine
