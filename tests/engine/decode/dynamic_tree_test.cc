// EAGLE-2's dynamic tree on hand-computed log-probabilities: the frontier keeps the global
// top_k by cumulative probability, and the chosen tree is the total_tokens best recorded
// nodes, parents first.
#include "engine/decode/dynamic_tree.h"

#include "engine/decode/device_dynamic_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
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
  at::manual_seed(3);
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

// The device tree is the host builder's: the same frontiers (as the fed nodes' tokens), the
// same parents' slots and ancestors for the head's mask, and the same chosen tree. The rows are
// permutations of one small set of probabilities, so cumulative scores tie across parents and
// the selection's tie-break (creation order) decides; a control breaking ties the other way
// gives other frontiers.
TEST(DynamicTreeTest, TheDeviceTreeIsTheHostBuilders) {
  at::manual_seed(11);
  const std::vector<double> values = {0.3, 0.2, 0.15, 0.1, 0.08, 0.07, 0.05, 0.03, 0.02};
  const auto row = [&]() {
    return torch::tensor(values, torch::kFloat64).index_select(0, torch::randperm(9)).log();
  };
  int ties_decided = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const DynamicTreeOptions options{/*total_tokens=*/9 + trial % 7, /*depth=*/3 + trial % 3,
                                     /*top_k=*/2 + trial % 3};
    DynamicTreeBuilder host(options);
    DeviceDynamicTree device(options);
    const torch::Tensor root = row().to(torch::kFloat32);
    host.Start(root);
    device.Start(root);
    // Host slots of fed nodes, to check the device's feed against.
    std::vector<int64_t> slot_of(4096, -1);
    int64_t slots = 0;
    while (host.expansions_left() > 0) {
      ASSERT_EQ(device.expansions_left(), host.expansions_left());
      const auto& frontier = host.frontier();
      const int64_t f = static_cast<int64_t>(frontier.size());
      ASSERT_EQ(device.frontier_size(), f);
      const DeviceDynamicTree::Feed feed = device.NextFeed();
      ASSERT_EQ(feed.attends.sizes(), (std::vector<int64_t>{f, slots}));
      for (int64_t i = 0; i < f; ++i) {
        const int64_t node = frontier[i], parent = host.parents()[node];
        EXPECT_EQ(feed.tokens[i].item<int64_t>(), host.tokens()[node]);
        EXPECT_EQ(feed.parent_slot[i].item<int64_t>(), parent < 0 ? -1 : slot_of[parent]);
        std::vector<bool> ancestor(slots, false);
        for (int64_t a = parent; a >= 0; a = host.parents()[a]) ancestor[slot_of[a]] = true;
        for (int64_t s = 0; s < slots; ++s) {
          EXPECT_EQ(feed.attends[i][s].item<bool>(), ancestor[s]) << "node " << node;
        }
      }
      for (int64_t i = 0; i < f; ++i) slot_of[frontier[i]] = slots + i;
      slots += f;
      std::vector<torch::Tensor> rows;
      for (int64_t i = 0; i < f; ++i) rows.push_back(row());
      const torch::Tensor log_probs = torch::stack(rows).to(torch::kFloat32);
      host.Expand(log_probs);
      device.Expand(log_probs);
      // Control: the frontier with ties broken against creation order. It differs from the
      // host's in some expansions, so equal frontiers above are the tie-break's doing.
      const int64_t k = std::min<int64_t>(options.top_k, 9);
      const int64_t first = static_cast<int64_t>(host.scores().size()) - f * k;
      std::vector<int64_t> reversed(f * k);
      std::iota(reversed.begin(), reversed.end(), first);
      std::stable_sort(reversed.begin(), reversed.end(), [&](int64_t a, int64_t b) {
        const double sa = host.scores()[a], sb = host.scores()[b];
        return sa > sb || (sa == sb && a > b);
      });
      reversed.resize(std::min<int64_t>(options.top_k, f * k));
      std::sort(reversed.begin(), reversed.end());
      ties_decided += reversed != host.frontier();
    }
    const auto expected = host.Finish();
    const auto chosen = device.Finish();
    ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
    EXPECT_EQ(chosen->nodes, expected.nodes) << "trial " << trial;
    EXPECT_EQ(chosen->tokens, expected.tokens) << "trial " << trial;
    EXPECT_EQ(chosen->shape.parents, expected.shape.parents) << "trial " << trial;
  }
  EXPECT_GT(ties_decided, 5);
}

// A padded tree (one graph for every width up to its own: PEANUT's steps) grows the tree of
// its real width node for node. The drafter here gives each node a distribution that depends
// on its token alone (as the head's would on its path), from a table with repeated values, so
// that cumulative scores tie across rows and the tie-break by creation order is exercised.
// Control: the same tree grown unpadded at the padded width differs, so the padding's marks
// are what make them equal.
TEST(DynamicTreeTest, APaddedDeviceTreeIsTheUnpaddedTreeOfItsWidth) {
  at::manual_seed(5);
  constexpr int64_t kVocab = 24;
  // Row t: the distribution after token t, a permutation of the same values (distinct within
  // a row, as a model's are in practice: top-k itself orders ties as it likes), so that
  // cumulative scores tie across rows.
  std::vector<double> values(kVocab);
  for (int64_t i = 0; i < kVocab; ++i) values[i] = std::pow(0.5, 1 + i % 12) * (1 + i / 12 * 0.5);
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t <= kVocab; ++t) {
    rows.push_back(torch::tensor(values, torch::kFloat64).index_select(0, torch::randperm(kVocab)));
  }
  const torch::Tensor table = torch::stack(rows).log().to(torch::kFloat32);
  const auto grow = [&](DeviceDynamicTree& tree) {
    tree.Start(table[kVocab]);
    while (tree.expansions_left() > 0) {
      tree.Expand(table.index_select(0, tree.NextFeed().tokens));
    }
    return tree.ChosenTreeOnDevice();
  };
  int differs_unpadded = 0, trials = 0;
  for (int64_t width : {1, 2, 3, 4, 5, 7}) {
    for (int64_t padded_width : {8, 16}) {
      for (int64_t depth : {1, 2, 3}) {
        for (int64_t total : {6, 20, 60}) {
          const DynamicTreeOptions exact{total, depth, width};
          const int64_t chosen = ChosenNodes(exact, kVocab);
          DeviceDynamicTree unpadded(exact);
          DeviceDynamicTree padded({chosen, depth, padded_width},
                                   torch::full({1}, width, torch::kInt64));
          DeviceDynamicTree wide({chosen, depth, padded_width});
          auto expected = grow(unpadded);
          auto got = grow(padded);
          auto control = grow(wide);
          ASSERT_TRUE(expected.ok() && got.ok() && control.ok());
          const std::string label = "width " + std::to_string(width) + " in " +
                                    std::to_string(padded_width) + ", depth " +
                                    std::to_string(depth) + ", total " + std::to_string(total);
          ASSERT_EQ(got->size(), chosen) << label;
          EXPECT_TRUE(torch::equal(got->tokens, expected->tokens)) << label;
          EXPECT_TRUE(torch::equal(got->parents, expected->parents)) << label;
          EXPECT_TRUE(torch::equal(got->depths, expected->depths)) << label;
          EXPECT_EQ(got->max_depth, expected->max_depth) << label;
          differs_unpadded += !torch::equal(control->tokens, expected->tokens) ||
                              !torch::equal(control->parents, expected->parents);
          ++trials;
        }
      }
    }
  }
  EXPECT_GT(differs_unpadded, trials / 2);
}

}  // namespace
}  // namespace mulo::engine
