// The layout of SJD-PAC's draft tree (sjd_pac.h), shared by its eager step and the verify
// graphs the pools capture for it (tree_verify_graphs.h, Shape::jacobi): level l sits at raster
// position n + l; the window's first levels branch, every node of the level above getting the
// same candidates (the carried draft first, then the level's extra candidates), and the rest
// of the window hangs as a chain off the carried drafts' path.
#ifndef MULO_ENGINE_DECODE_PAC_TREE_H_
#define MULO_ENGINE_DECODE_PAC_TREE_H_

#include <cstdint>
#include <vector>

#include "engine/model/tree_verify_graphs.h"

namespace mulo::engine {

// Nodes in creation order, parents before children. A node's candidate indexes the candidate
// table: rows [0, length) the carried drafts, then level l's extra candidate k at
// length + l * (width - 1) + k.
struct PacTreeLayout {
  std::vector<int64_t> parents;     // -1 = the root (the last committed token)
  std::vector<int64_t> levels;      // 0 for the root's children
  std::vector<int64_t> candidates;  // the node's row of the candidate table
  std::vector<int64_t> main;        // main[l]: the carried draft's node on the carried path

  int64_t size() const { return static_cast<int64_t>(parents.size()); }
};

// The tree over a window of `length` positions whose level l < extras.size() branches into
// 1 + extras[l] candidates (extras[l] <= width - 1; levels past `length` are ignored).
PacTreeLayout LayoutPacTree(int64_t length, const std::vector<int64_t>& extras, int64_t width);

// The verify graphs' shape of SJD-PAC's window of `window` drafts, `width` candidates per
// branching level and `depth` tree levels (SjdPacOptions): the whole tree, every level with
// all its extras (a step with fewer marks the rest not real, and a shorter window the levels
// past it).
TreeVerifyGraphs::Shape PacVerifyShape(int64_t window, int64_t width, int64_t depth);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_PAC_TREE_H_
