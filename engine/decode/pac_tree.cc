#include "engine/decode/pac_tree.h"

#include <algorithm>
#include <utility>

namespace mulo::engine {

PacTreeLayout LayoutPacTree(int64_t length, const std::vector<int64_t>& extras, int64_t width) {
  PacTreeLayout tree;
  const int64_t branching = std::min<int64_t>(static_cast<int64_t>(extras.size()), length);
  auto add = [&](int64_t parent, int64_t level, int64_t candidate) {
    tree.parents.push_back(parent);
    tree.levels.push_back(level);
    tree.candidates.push_back(candidate);
    return tree.size() - 1;
  };
  std::vector<int64_t> previous = {-1};  // the nodes of the level above (-1 = the root)
  for (int64_t l = 0; l < length; ++l) {
    const int64_t main_parent = l == 0 ? -1 : tree.main[l - 1];
    if (l >= branching) {  // past the tree: the chain of carried drafts
      tree.main.push_back(add(main_parent, l, l));
      continue;
    }
    std::vector<int64_t> level_nodes;
    for (int64_t parent : previous) {
      const int64_t node = add(parent, l, l);
      if (parent == main_parent) tree.main.push_back(node);
      level_nodes.push_back(node);
      for (int64_t k = 0; k < extras[l]; ++k) {
        level_nodes.push_back(add(parent, l, length + l * (width - 1) + k));
      }
    }
    previous = std::move(level_nodes);
  }
  return tree;
}

TreeVerifyGraphs::Shape PacVerifyShape(int64_t window, int64_t width, int64_t depth) {
  const int64_t levels = width > 1 ? std::min(depth - 1, window) : 0;
  const PacTreeLayout tree =
      LayoutPacTree(window, std::vector<int64_t>(levels, width - 1), width);
  TreeVerifyGraphs::Shape shape;
  shape.nodes = tree.size();
  shape.max_depth = window;
  shape.max_children = levels > 0 ? width : 1;
  shape.parents = tree.parents;
  shape.jacobi.window = window;
  shape.jacobi.levels = levels;
  shape.jacobi.extras = width - 1;
  shape.jacobi.candidates = tree.candidates;
  shape.jacobi.levels_of = tree.levels;
  shape.jacobi.main = tree.main;
  return shape;
}

}  // namespace mulo::engine
