// Draft tree shapes: the static 58-node tree of EAGLE-1 / LANTERN++ has the reference's
// per-depth widths, paths are validated, and the tree attention mask lets each node see the
// cached prefix, its ancestors and itself only.
#include "engine/decode/draft_tree.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

TEST(DraftTreeTest, StaticTreeHasTheReferenceWidthsPerDepth) {
  const TreeShape tree = StaticTree57();
  ASSERT_EQ(tree.size(), 57);  // + the root = 58 nodes
  EXPECT_EQ(tree.max_depth(), 5);
  std::vector<int> per_depth(6, 0);
  for (int64_t i = 0; i < tree.size(); ++i) {
    ASSERT_LT(tree.parents[i], i);
    if (tree.parents[i] >= 0) EXPECT_EQ(tree.depths[i], tree.depths[tree.parents[i]] + 1);
    ++per_depth[tree.depths[i]];
  }
  EXPECT_EQ(per_depth, (std::vector<int>{0, 5, 13, 16, 14, 9}));
  EXPECT_EQ(tree.Children(-1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // The first choice at every depth is the deepest path: ranks 0, 0, 0, 0, 0.
  const std::vector<int64_t> spine = tree.PathTo(48);
  ASSERT_EQ(spine.size(), 5u);
  for (int64_t node : spine) EXPECT_EQ(tree.ranks[node], 0);
  // Children come in rank order.
  for (int64_t node = -1; node < tree.size(); ++node) {
    const auto children = tree.Children(node);
    for (size_t r = 0; r < children.size(); ++r) EXPECT_EQ(tree.ranks[children[r]], (int64_t)r);
  }
}

// Where the image ends a step drafts the tree cut to the rows left: the nodes at most that
// deep, in the full tree's order, each under the same parent.
TEST(DraftTreeTest, StaticTreeCutKeepsTheShallowNodesInOrder) {
  const TreeShape full = StaticTree57();
  const std::vector<int64_t> sizes = {0, 5, 18, 34, 48, 57, 57};
  for (int64_t depth = 0; depth <= 6; ++depth) {
    const TreeShape cut = StaticTree57Cut(depth);
    ASSERT_EQ(cut.size(), sizes[depth]) << "depth " << depth;
    if (cut.size() > 0) EXPECT_EQ(cut.max_depth(), std::min<int64_t>(depth, 5));
    // The full tree's nodes at most `depth` deep come first in breadth order: the cut is its
    // prefix, parents and ranks unchanged.
    for (int64_t i = 0; i < cut.size(); ++i) {
      EXPECT_EQ(cut.parents[i], full.parents[i]) << "depth " << depth << ", node " << i;
      EXPECT_EQ(cut.ranks[i], full.ranks[i]);
    }
  }
}

TEST(DraftTreeTest, PathsAreValidated) {
  EXPECT_TRUE(TreeFromPaths({{0}, {1}, {0, 0}}).ok());
  EXPECT_EQ(TreeFromPaths({{0, 0}, {0}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TreeFromPaths({{0}, {2}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TreeFromPaths({{0}, {0}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TreeFromParents({-1, 2, 0}).status().code(), StatusCode::kInvalidArgument);
  auto tree = TreeFromParents({-1, -1, 0, 0, 2});
  ASSERT_OK(tree);
  EXPECT_EQ(tree->depths, (std::vector<int64_t>{1, 1, 2, 2, 3}));
  EXPECT_EQ(tree->ranks, (std::vector<int64_t>{0, 1, 0, 1, 0}));
}

TEST(DraftTreeTest, MaskSeesThePrefixTheAncestorsAndItself) {
  auto tree = TreeFromParents({-1, -1, 0, 0, 2});
  ASSERT_OK(tree);
  const auto mask = TreeAttentionMask(*tree, 3);
  ASSERT_EQ(mask.sizes(), (std::vector<int64_t>{5, 8}));
  const std::vector<std::vector<int>> expected = {
      {1, 1, 1, 1, 0, 0, 0, 0},  // node 0
      {1, 1, 1, 0, 1, 0, 0, 0},  // node 1: not its sibling
      {1, 1, 1, 1, 0, 1, 0, 0},  // node 2: parent 0
      {1, 1, 1, 1, 0, 0, 1, 0},  // node 3: parent 0, not its sibling 2
      {1, 1, 1, 1, 0, 1, 0, 1},  // node 4: 0 -> 2 -> 4
  };
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 8; ++j) EXPECT_EQ(mask[i][j].item<bool>(), expected[i][j] == 1) << i << j;
  }
}

}  // namespace
}  // namespace mulo::engine
