#include "engine/decode/draft_tree.h"

#include <algorithm>
#include <map>
#include <string>

namespace mulo::engine {

int64_t TreeShape::max_depth() const {
  return depths.empty() ? 0 : *std::max_element(depths.begin(), depths.end());
}

std::vector<int64_t> TreeShape::Children(int64_t node) const {
  std::vector<int64_t> children;
  for (int64_t i = 0; i < size(); ++i) {
    if (parents[i] == node) children.push_back(i);
  }
  return children;  // stored in rank order (TreeFromParents / TreeFromPaths)
}

std::vector<int64_t> TreeShape::PathTo(int64_t node) const {
  std::vector<int64_t> path;
  for (int64_t i = node; i >= 0; i = parents[i]) path.push_back(i);
  std::reverse(path.begin(), path.end());
  return path;
}

StatusOr<TreeShape> TreeFromParents(const std::vector<int64_t>& parents) {
  TreeShape tree;
  std::map<int64_t, int64_t> children_so_far;
  for (int64_t i = 0; i < static_cast<int64_t>(parents.size()); ++i) {
    const int64_t parent = parents[i];
    if (parent < -1 || parent >= i) {
      return InvalidArgumentError("tree: node " + std::to_string(i) + "'s parent " +
                                  std::to_string(parent) + " is not an earlier node or -1");
    }
    tree.parents.push_back(parent);
    tree.depths.push_back(parent < 0 ? 1 : tree.depths[parent] + 1);
    tree.ranks.push_back(children_so_far[parent]++);
  }
  return tree;
}

StatusOr<TreeShape> TreeFromPaths(const std::vector<std::vector<int64_t>>& paths) {
  std::map<std::vector<int64_t>, int64_t> index;
  std::vector<int64_t> parents;
  for (const auto& path : paths) {
    const std::string where = "tree path " + std::to_string(parents.size());
    if (path.empty() || index.count(path)) {
      return InvalidArgumentError(where + ": empty or repeated");
    }
    const std::vector<int64_t> parent_path(path.begin(), path.end() - 1);
    int64_t parent = -1;
    if (!parent_path.empty()) {
      auto found = index.find(parent_path);
      if (found == index.end()) return InvalidArgumentError(where + ": its parent comes later");
      parent = found->second;
    }
    // Sibling ranks in order: a node of rank r needs its rank r - 1 sibling already.
    std::vector<int64_t> previous = path;
    if (path.back() > 0) {
      --previous.back();
      if (!index.count(previous)) return InvalidArgumentError(where + ": a sibling rank is missing");
    } else if (path.back() < 0) {
      return InvalidArgumentError(where + ": negative rank");
    }
    index[path] = static_cast<int64_t>(parents.size());
    parents.push_back(parent);
  }
  return TreeFromParents(parents);
}

TreeShape StaticTree57() {
  // Each path lists sibling ranks from the root down (0 = the drafter's first choice).
  static const std::vector<std::vector<int64_t>> kPaths = {
      {0}, {1}, {2}, {3}, {4},
      {0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 1}, {2, 2}, {3, 0},
      {3, 1}, {4, 0},
      {0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {0, 0, 3}, {0, 1, 0}, {0, 1, 1}, {0, 1, 2}, {0, 2, 0},
      {0, 2, 1}, {0, 2, 2}, {0, 3, 0}, {0, 3, 1}, {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {2, 0, 0},
      {0, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 0, 2}, {0, 0, 0, 3}, {0, 0, 1, 0}, {0, 0, 1, 1},
      {0, 0, 1, 2}, {0, 0, 2, 0}, {0, 0, 2, 1}, {0, 0, 3, 0}, {0, 1, 0, 0}, {0, 1, 0, 1},
      {0, 1, 1, 0}, {0, 2, 0, 0},
      {0, 0, 0, 0, 0}, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 2}, {0, 0, 0, 1, 0}, {0, 0, 0, 1, 1},
      {0, 0, 1, 0, 0}, {0, 0, 1, 0, 1}, {0, 0, 1, 1, 0}, {0, 0, 2, 0, 0}};
  return *TreeFromPaths(kPaths);  // a fixed, valid table (draft_tree_test)
}

TreeShape StaticTree57Cut(int64_t max_depth) {
  const TreeShape full = StaticTree57();
  std::vector<int64_t> parents, index(full.size(), -1);
  for (int64_t i = 0; i < full.size(); ++i) {
    if (full.depths[i] > max_depth) continue;
    index[i] = static_cast<int64_t>(parents.size());
    parents.push_back(full.parents[i] < 0 ? -1 : index[full.parents[i]]);
  }
  return *TreeFromParents(parents);  // parents first, as in the full tree
}

torch::Tensor TreeAttentionMask(const TreeShape& tree, int64_t prefix_rows) {
  const int64_t n = tree.size();
  auto mask = torch::zeros({n, prefix_rows + n}, torch::kBool);
  if (prefix_rows > 0) mask.narrow(1, 0, prefix_rows).fill_(true);
  auto rows = mask.accessor<bool, 2>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t a = i; a >= 0; a = tree.parents[a]) rows[i][prefix_rows + a] = true;
  }
  return mask;
}

}  // namespace mulo::engine
