// PEANUT's tree-shape policy (Chen et al. 2025, "PEANUT: adjacency-adaptive dynamical draft
// trees", Section 4): the depth and width (top-k) of each step's EAGLE-2 tree come from the
// trees of the spatial neighbours of the step's first new position, then move by one
// bisection step.
//   Initialisation (4.1): Horizontal Repeat copies the shape recorded at the left neighbour
//     (the previous row's last position at column 0), Vertical Repeat the one above (the
//     left one in row 0), Random draws depth and width uniformly inside the bounds.
//   Adaptation (4.2): with the copied tree's acceptance rate alpha = accepted length / its
//     depth, alpha >= beta ("positive") gives depth + l_d and width - l_k, otherwise depth -
//     l_d and width + l_k; the depth stays strictly inside (min_depth, max_depth), and the
//     width strictly inside (min_top_k, max_top_k) only while the new depth is above 1 (a
//     one-layer tree's cost does not grow with the square of its width); at depth 1 the
//     width stops at total_tokens (a tree keeps its total_tokens best nodes, all of them
//     within every node's top total_tokens children, so more width drafts the same tree). A
//     step never leaves the bounds; a shape already outside them (an initial tree they
//     exclude) stays put.
// With l_d = l_k = 0 every step keeps the initial shape: EAGLE-2's tree. Depth here is the
// tree's expansion depth, as EagleParams.depth.
//
// EagleDecoder asks it for each step's shape when EagleOptions::peanut is set (peanut.h);
// the policy alone is tested by tests/engine/decode/peanut_shapes_test.cc.
#ifndef MULO_ENGINE_DECODE_PEANUT_SHAPES_H_
#define MULO_ENGINE_DECODE_PEANUT_SHAPES_H_

#include <cstdint>
#include <vector>

#include "engine/decode/dynamic_tree.h"
#include "engine/sampling/rng.h"

namespace mulo::engine {

enum class PeanutInit { kHorizontalRepeat, kVerticalRepeat, kRandom };

struct PeanutOptions {
  double beta = 1.0;  // positive threshold on alpha (paper: 1)
  int64_t l_d = 1;    // depth step (paper: 1)
  int64_t l_k = 3;    // width step (paper: 3 for Anole, 10 for LlamaGen)
  int64_t min_depth = 0, max_depth = 10;  // open bounds (paper: (0, 10))
  int64_t min_top_k = 3, max_top_k = 14;  // open bounds (paper: (3, 14) Anole, (3, 40) LlamaGen)
  PeanutInit init = PeanutInit::kHorizontalRepeat;
};

class PeanutShapes {
 public:
  // `initial`: the shape before any tree was recorded (EAGLE-2's 60 / 7 / 10); its
  // total_tokens is kept by every shape. `seed` drives Random initialisation only.
  PeanutShapes(const PeanutOptions& options, const DynamicTreeOptions& initial, int64_t grid,
               uint64_t seed);

  // The shape of the tree drafted after the committed prefix, whose first new position is
  // `position`.
  DynamicTreeOptions ShapeAt(int64_t position);

  // The step that drafted with `shape` committed positions [first, first + count); `alpha`
  // is its tree's acceptance rate (accepted length / tree depth).
  void Record(int64_t first, int64_t count, const DynamicTreeOptions& shape, double alpha);

  // The shape a step takes after a neighbour that drafted with `from`: one adaptation step,
  // positive or not (the rules above).
  static DynamicTreeOptions Adapted(const PeanutOptions& options, DynamicTreeOptions from,
                                    bool positive);
  // Every shape a step may take: the initial one, every one Random initialisation draws,
  // every one an adaptation step leads to from those, and each of them cut to every shallower
  // depth (the image's last steps), in no particular order. What the worker's pools capture
  // PEANUT's drafting graphs for (kv_pools.h).
  static std::vector<DynamicTreeOptions> Reachable(const PeanutOptions& options,
                                                   const DynamicTreeOptions& initial);

 private:
  struct Recorded {
    bool set = false;
    DynamicTreeOptions shape;
    double alpha = 0.0;
  };
  // The neighbour whose tree initialises `position`'s, or -1.
  int64_t Neighbour(int64_t position) const;

  PeanutOptions options_;
  DynamicTreeOptions initial_;
  int64_t grid_;
  Rng rng_;
  std::vector<Recorded> recorded_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_PEANUT_SHAPES_H_
