// EAGLE-2's dynamic tree on hand-computed log-probabilities: the frontier keeps the global
// top_k by cumulative probability, and the chosen tree is the total_tokens best recorded
// nodes, parents first.
#include "engine/decode/dynamic_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace mulo::engine {
namespace {

torch::Tensor LogOf(std::vector<double> p) {
  return torch::tensor(p, torch::kFloat64).log();
}

TEST(DynamicTreeTest, ExpandsByCumulativeProbabilityAndKeepsTheBestNodes) {
  DynamicTreeBuilder tree({/*total_tokens=*/5, /*depth=*/2, /*top_k=*/2});
  tree.Start(LogOf({0.5, 0.25, 0.1, 0.08, 0.04, 0.03}));
  EXPECT_EQ(tree.tokens(), (std::vector<int64_t>{0, 1}));  // nodes 0 (.5) and 1 (.25)
  EXPECT_EQ(tree.frontier(), (std::vector<int64_t>{0, 1}));
  // Node 0 proposes tokens 2 (.5 x .6 = .30) and 3 (.075); node 1 tokens 0 (.25 x .7 = .175)
  // and 1 (.05). The global top 2 are nodes 2 and 4.
  tree.Expand(torch::stack({LogOf({0.05, 0.1, 0.6, 0.15, 0.06, 0.04}),
                            LogOf({0.7, 0.2, 0.04, 0.03, 0.02, 0.01})}));
  EXPECT_EQ(tree.frontier(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(tree.expansions_left(), 1);
  // Node 2 proposes 0 (.27) and 1 (.015); node 4 proposes 0 (.0875) and 1 (.07).
  tree.Expand(torch::stack({LogOf({0.9, 0.05, 0.02, 0.01, 0.01, 0.01}),
                            LogOf({0.5, 0.4, 0.04, 0.03, 0.02, 0.01})}));
  EXPECT_EQ(tree.expansions_left(), 0);
  ASSERT_EQ(tree.tokens().size(), 10u);
  EXPECT_NEAR(std::exp(tree.scores()[6]), 0.27, 1e-9);
  // Best five: nodes 0 (.5), 2 (.30), 6 (.27), 1 (.25), 4 (.175), in creation order.
  const auto chosen = tree.Finish();
  EXPECT_EQ(chosen.nodes, (std::vector<int64_t>{0, 1, 2, 4, 6}));
  EXPECT_EQ(chosen.tokens, (std::vector<int64_t>{0, 1, 2, 0, 0}));
  EXPECT_EQ(chosen.shape.parents, (std::vector<int64_t>{-1, -1, 0, 1, 2}));
  EXPECT_EQ(chosen.shape.depths, (std::vector<int64_t>{1, 1, 2, 2, 3}));
}

TEST(DynamicTreeTest, ChosenTreesAreConnectedWhateverTheScores) {
  torch::manual_seed(3);
  for (int trial = 0; trial < 20; ++trial) {
    DynamicTreeBuilder tree({/*total_tokens=*/12, /*depth=*/4, /*top_k=*/3});
    tree.Start(torch::log_softmax(torch::randn({16}, torch::kFloat64) * 2, 0));
    while (tree.expansions_left() > 0) {
      const auto rows = static_cast<int64_t>(tree.frontier().size());
      tree.Expand(torch::log_softmax(torch::randn({rows, 16}, torch::kFloat64) * 2, 1));
    }
    const auto chosen = tree.Finish();
    ASSERT_EQ(chosen.nodes.size(), 12u);
    double worst_chosen = 0;
    for (size_t i = 0; i < chosen.nodes.size(); ++i) {
      EXPECT_LT(chosen.shape.parents[i], static_cast<int64_t>(i));
      worst_chosen = std::min(worst_chosen, tree.scores()[chosen.nodes[i]]);
    }
    // No recorded node outside the tree scores better than the worst node inside it.
    for (size_t node = 0; node < tree.tokens().size(); ++node) {
      if (std::find(chosen.nodes.begin(), chosen.nodes.end(), node) == chosen.nodes.end()) {
        EXPECT_LE(tree.scores()[node], worst_chosen);
      }
    }
  }
}

}  // namespace
}  // namespace mulo::engine
