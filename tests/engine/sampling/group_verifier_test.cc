// GSD's group G(x): the tokens ranked next to x by the target (size / 2 less likely,
// size - 1 - size / 2 more likely), kept when their probability is within the gap of p(x) and
// their embedding within the squared distance of x's; acceptance min(1, p(G) / q(G)); size 1
// is the exact rule, draw for draw.
#include "engine/sampling/group_verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

// p over 8 tokens, most likely first: 3 (.30), 1 (.20), 5 (.15), 0 (.12), 7 (.10), 2 (.07),
// 6 (.04), 4 (.02).
torch::Tensor P() {
  return torch::tensor({0.12f, 0.20f, 0.07f, 0.30f, 0.02f, 0.15f, 0.04f, 0.10f});
}

// Embeddings on a line: token t at t, so the squared distance of t and u is (t - u)^2.
torch::Tensor Line() { return torch::arange(8, torch::kFloat32).view({8, 1}); }

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(GroupVerifierTest, GroupIsTheRankWindowFilteredByGapAndDistance) {
  const auto p = P();
  // size 5 around token 0 (rank 3): 2 less likely (7, 2), 2 more likely (1, 5).
  GroupVerifier wide({5, 1.0, 1e9}, Line());
  EXPECT_EQ(Sorted(wide.Group(p, 0)), (std::vector<int64_t>{0, 1, 2, 5, 7}));
  EXPECT_EQ(wide.Group(p, 0).front(), 0);
  // size 4: 2 less likely, 1 more likely.
  GroupVerifier four({4, 1.0, 1e9}, Line());
  EXPECT_EQ(Sorted(four.Group(p, 0)), (std::vector<int64_t>{0, 2, 5, 7}));
  // The gap: |p(y) - p(0)| < 0.045 keeps 7 (.02) and 5 (.03), not 2 (.05) or 1 (.08).
  GroupVerifier gap({5, 0.045, 1e9}, Line());
  EXPECT_EQ(Sorted(gap.Group(p, 0)), (std::vector<int64_t>{0, 5, 7}));
  // The distance: (y - 0)^2 < 5 keeps 1 and 2 only.
  GroupVerifier near({5, 1.0, 5.0}, Line());
  EXPECT_EQ(Sorted(near.Group(p, 0)), (std::vector<int64_t>{0, 1, 2}));
  // At the top of the order the window is cut short: token 3 has nothing more likely.
  EXPECT_EQ(Sorted(wide.Group(p, 3)), (std::vector<int64_t>{1, 3, 5}));
  GroupVerifier single({1, 1.0, 1e9}, Line());
  EXPECT_EQ(single.Group(p, 4), (std::vector<int64_t>{4}));
}

TEST(GroupVerifierTest, KeepsWithTheGroupsMassRatio) {
  // Draft 6 from a one-hot q: alone it survives with p(6) = .04; its group {6, 2, 4} (size 3,
  // everything close) with p(G) = .13. Over many uniforms the keep rates match.
  const auto p = P().unsqueeze(0);
  DraftBatch drafts{{6}, {-1}, torch::zeros({1, 8}).index_fill_(1, torch::tensor({6}), 1.0)};
  GroupVerifier grouped({3, 1.0, 1e9}, Line());
  ExactVerifier exact;
  Rng accept_g(1, RngStream::kAcceptance), draw_g(1);
  Rng accept_e(1, RngStream::kAcceptance), draw_e(1);
  int kept_g = 0, kept_e = 0, relaxed = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto g = grouped.Verify({drafts, p, false}, {&accept_g, &draw_g});
    auto e = exact.Verify({drafts, p, false}, {&accept_e, &draw_e});
    ASSERT_OK(g);
    ASSERT_OK(e);
    kept_g += !g->accepted.empty();
    kept_e += !e->accepted.empty();
    relaxed += g->relaxed_accepts;
    EXPECT_EQ(g->pooled_drafts, 1);
    EXPECT_EQ(g->pooled_neighbors, 2);
    if (g->accepted.empty()) EXPECT_NE(g->next_token, 6);  // the residual excludes x
  }
  EXPECT_NEAR(kept_g / static_cast<double>(n), 0.13, 0.01);
  EXPECT_NEAR(kept_e / static_cast<double>(n), 0.04, 0.006);
  EXPECT_NEAR(relaxed / static_cast<double>(n), 0.09, 0.01);
}

TEST(GroupVerifierTest, SizeOneIsTheExactRuleDrawForDraw) {
  auto p = torch::softmax(torch::randn({6, 8}, torch::TensorOptions().dtype(torch::kFloat32)), 1);
  auto q = torch::softmax(torch::randn({5, 8}), 1);
  DraftBatch drafts{{1, 4, 2, 7, 0}, DraftBatch::ChainParents(5), q};
  GroupVerifier single({1, 0.15, 0.5}, Line());
  ExactVerifier exact;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng a1(seed, RngStream::kAcceptance), d1(seed), a2(seed, RngStream::kAcceptance), d2(seed);
    auto g = single.Verify({drafts, p, false}, {&a1, &d1});
    auto e = exact.Verify({drafts, p, false}, {&a2, &d2});
    ASSERT_OK(g);
    ASSERT_OK(e);
    EXPECT_EQ(g->accepted, e->accepted);
    EXPECT_EQ(g->next_token, e->next_token);
  }
}

}  // namespace
}  // namespace mulo::engine
