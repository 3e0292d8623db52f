// PEANUT's shape policy alone: initialisation from the left / upper neighbour, the bisection
// step by the neighbour's acceptance rate, the open bounds (width bounded only above depth 1,
// and there by total_tokens),
// Random inside the bounds, and no adaptation (l_d = l_k = 0) keeping EAGLE-2's shape.
#include "engine/decode/peanut_shapes.h"

#include <gtest/gtest.h>

#include <vector>

namespace mulo::engine {
namespace {

constexpr DynamicTreeOptions kEagle2{60, 7, 10};

TEST(PeanutShapesTest, PositiveTreesGrowDeeperAndNarrowerNegativeOnesShallowerAndWider) {
  PeanutShapes shapes({}, kEagle2, 8, 0);
  EXPECT_EQ(shapes.ShapeAt(1).depth, 7);  // nothing recorded yet: the initial shape
  shapes.Record(1, 3, {60, 7, 10}, 1.0);  // alpha >= beta = 1: positive
  DynamicTreeOptions next = shapes.ShapeAt(4);  // left neighbour 3
  EXPECT_EQ(next.total_tokens, 60);
  EXPECT_EQ(next.depth, 8);
  EXPECT_EQ(next.top_k, 7);
  shapes.Record(4, 1, next, 0.25);  // negative
  next = shapes.ShapeAt(5);
  EXPECT_EQ(next.depth, 7);
  EXPECT_EQ(next.top_k, 10);
}

TEST(PeanutShapesTest, BoundsAreOpenAndWidthIsFreeAtDepthOne) {
  PeanutOptions o;
  o.l_k = 5;
  PeanutShapes shapes(o, kEagle2, 8, 0);
  shapes.Record(0, 1, {60, 9, 4}, 1.0);  // positive at the top: depth stays 9, width 4
  DynamicTreeOptions s = shapes.ShapeAt(1);
  EXPECT_EQ(s.depth, 9);
  EXPECT_EQ(s.top_k, 4);
  shapes.Record(1, 1, {60, 2, 12}, 0.1);  // negative: depth 1, width 17 not bounded
  s = shapes.ShapeAt(2);
  EXPECT_EQ(s.depth, 1);
  EXPECT_EQ(s.top_k, 17);
  shapes.Record(2, 1, {60, 3, 12}, 0.1);  // negative: depth 2 > 1, width bounded to 13
  s = shapes.ShapeAt(3);
  EXPECT_EQ(s.depth, 2);
  EXPECT_EQ(s.top_k, 13);
}

// Free at depth 1, but never past total_tokens: a hard region (negative step after step)
// would otherwise widen a one-layer tree without limit, drafting the same nodes slower.
TEST(PeanutShapesTest, WidthAtDepthOneStopsAtTotalTokens) {
  PeanutOptions o;
  o.l_k = 10;
  constexpr int64_t kGrid = 16;
  PeanutShapes shapes(o, kEagle2, kGrid, 0);
  DynamicTreeOptions s = kEagle2;
  for (int64_t position = 1; position < kGrid * kGrid; ++position) {
    shapes.Record(position - 1, 1, s, 0.0);  // every tree negative
    s = shapes.ShapeAt(position);
    EXPECT_LE(s.top_k, kEagle2.total_tokens) << position;
  }
  EXPECT_EQ(s.depth, 1);
  EXPECT_EQ(s.top_k, kEagle2.total_tokens);
}

TEST(PeanutShapesTest, AShapeOutsideTheBoundsIsNotPulledInByThem) {
  PeanutOptions o;
  o.l_d = 0;
  o.l_k = 0;
  PeanutShapes shapes(o, {12, 3, 3}, 8, 0);  // width 3 is outside (3, 14)
  shapes.Record(1, 1, shapes.ShapeAt(1), 1.0);
  EXPECT_EQ(shapes.ShapeAt(2).top_k, 3);
  o.l_k = 3;
  PeanutShapes moving(o, {12, 3, 3}, 8, 0);
  moving.Record(1, 1, {12, 3, 3}, 1.0);  // positive: 3 - 3 = 0 would leave further
  EXPECT_EQ(moving.ShapeAt(2).top_k, 3);
}

TEST(PeanutShapesTest, VerticalRepeatCopiesTheTreeAbove) {
  PeanutOptions o;
  o.init = PeanutInit::kVerticalRepeat;
  PeanutShapes shapes(o, kEagle2, 4, 0);
  shapes.Record(0, 4, {60, 3, 5}, 1.0);    // row 0
  shapes.Record(4, 1, {60, 6, 12}, 0.0);   // (1, 0)
  EXPECT_EQ(shapes.ShapeAt(5).depth, 4);   // from (0, 1), positive
  EXPECT_EQ(shapes.ShapeAt(5).top_k, 4);
  EXPECT_EQ(shapes.ShapeAt(2).depth, 4);   // row 0 falls back to the left neighbour
  o.init = PeanutInit::kHorizontalRepeat;
  PeanutShapes left(o, kEagle2, 4, 0);
  left.Record(0, 4, {60, 3, 5}, 1.0);
  left.Record(4, 1, {60, 6, 12}, 0.0);
  EXPECT_EQ(left.ShapeAt(5).depth, 5);     // from (1, 0), negative
  EXPECT_EQ(left.ShapeAt(4).depth, 4);     // column 0: the previous row's last position
}

TEST(PeanutShapesTest, RandomStaysInsideTheBoundsAndCoversThem) {
  PeanutOptions o;
  o.init = PeanutInit::kRandom;
  PeanutShapes shapes(o, kEagle2, 16, 7);
  std::vector<int> depths(10, 0), widths(14, 0);
  for (int64_t p = 0; p < 2000; ++p) {
    const DynamicTreeOptions s = shapes.ShapeAt(p % 256);
    ASSERT_GT(s.depth, 0);
    ASSERT_LT(s.depth, 10);
    ASSERT_GT(s.top_k, 3);
    ASSERT_LT(s.top_k, 14);
    ++depths[s.depth];
    ++widths[s.top_k];
  }
  for (int d = 1; d <= 9; ++d) EXPECT_GT(depths[d], 100) << d;
  for (int k = 4; k <= 13; ++k) EXPECT_GT(widths[k], 100) << k;
}

TEST(PeanutShapesTest, NoAdaptationKeepsEagle2sShape) {
  PeanutOptions o;
  o.l_d = 0;
  o.l_k = 0;
  PeanutShapes shapes(o, kEagle2, 8, 0);
  int64_t position = 1;
  for (double alpha : {1.0, 0.0, 0.5, 1.0, 0.1}) {
    const DynamicTreeOptions s = shapes.ShapeAt(position);
    EXPECT_EQ(s.depth, 7);
    EXPECT_EQ(s.top_k, 10);
    EXPECT_EQ(s.total_tokens, 60);
    shapes.Record(position, 2, s, alpha);
    position += 2;
  }
}

// Reachable holds every shape the policy gives, and each shape cut shallower (the image's
// last steps): steps under random acceptance rates, for the paper's Anole and LlamaGen
// settings and for each initialisation. It is not every shape: with width steps of 3 from 10,
// a width of 11 is never taken.
TEST(PeanutShapesTest, ReachableHoldsEveryShapeAStepTakes) {
  PeanutOptions llamagen;
  llamagen.l_k = 10;
  llamagen.max_top_k = 40;
  PeanutOptions vertical, random;
  vertical.init = PeanutInit::kVerticalRepeat;
  random.init = PeanutInit::kRandom;
  for (const PeanutOptions& o : {PeanutOptions(), llamagen, vertical, random}) {
    const std::vector<DynamicTreeOptions> reachable = PeanutShapes::Reachable(o, kEagle2);
    const auto holds = [&](const DynamicTreeOptions& s) {
      for (const DynamicTreeOptions& r : reachable) {
        if (r.total_tokens == s.total_tokens && r.depth == s.depth && r.top_k == s.top_k) {
          return true;
        }
      }
      return false;
    };
    Rng alphas(3, RngStream::kTarget);
    PeanutShapes shapes(o, kEagle2, 16, 9);
    for (int64_t position = 0; position < 256;) {
      const DynamicTreeOptions s = shapes.ShapeAt(position);
      for (int64_t depth = 0; depth <= s.depth; ++depth) {
        ASSERT_TRUE(holds({s.total_tokens, depth, s.top_k}))
            << "depth " << depth << ", top_k " << s.top_k << " at " << position;
      }
      const int64_t committed = 1 + static_cast<int64_t>(alphas.Uniform() * 3);
      shapes.Record(position, committed, s, alphas.Uniform() * 1.6);
      position += committed;
    }
    if (o.init != PeanutInit::kRandom && o.l_k == 3) {
      EXPECT_FALSE(holds({60, 7, 11}));
    }
  }
}

}  // namespace
}  // namespace mulo::engine
