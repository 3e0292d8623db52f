#include "engine/decode/peanut_shapes.h"

#include <algorithm>

namespace mulo::engine {

PeanutShapes::PeanutShapes(const PeanutOptions& options, const DynamicTreeOptions& initial,
                           int64_t grid, uint64_t seed)
    : options_(options),
      initial_(initial),
      grid_(grid),
      rng_(seed, RngStream::kDrafter),
      recorded_(grid * grid) {}

int64_t PeanutShapes::Neighbour(int64_t position) const {
  if (options_.init == PeanutInit::kVerticalRepeat && position >= grid_) return position - grid_;
  return position - 1;
}

DynamicTreeOptions PeanutShapes::ShapeAt(int64_t position) {
  DynamicTreeOptions shape = initial_;
  if (options_.init == PeanutInit::kRandom) {
    // Uniform inside the open bounds.
    auto uniform = [&](int64_t low, int64_t high) {
      const int64_t span = std::max<int64_t>(1, high - low - 1);
      return low + 1 + std::min<int64_t>(span - 1, static_cast<int64_t>(rng_.Uniform() * span));
    };
    shape.depth = uniform(options_.min_depth, options_.max_depth);
    shape.top_k = uniform(options_.min_top_k, options_.max_top_k);
    return shape;
  }
  const int64_t from = Neighbour(position);
  if (from < 0 || !recorded_[from].set) return shape;
  const Recorded& neighbour = recorded_[from];
  const bool positive = neighbour.alpha >= options_.beta;
  const int64_t depth = neighbour.shape.depth + (positive ? options_.l_d : -options_.l_d);
  const int64_t top_k = neighbour.shape.top_k + (positive ? -options_.l_k : options_.l_k);
  // The bounds stop a step from leaving them; a shape that starts outside them (an initial
  // tree the bounds exclude) is not moved by them.
  const int64_t d = neighbour.shape.depth, k = neighbour.shape.top_k;
  shape.depth = std::clamp(depth, std::min(d, options_.min_depth + 1),
                           std::max(d, options_.max_depth - 1));
  // At depth 1 the paper lifts the width bound (a one-layer tree costs its width, not its
  // square). The width still stops at total_tokens: the tree keeps its total_tokens best
  // nodes, each of them within its parent's top total_tokens children (siblings that outscore
  // it are kept too), so more width drafts the same tree, only slower, and a hard region
  // (alpha < beta step after step) would grow it without limit.
  shape.top_k = depth > 1 ? std::clamp(top_k, std::min(k, options_.min_top_k + 1),
                                       std::max(k, options_.max_top_k - 1))
                          : std::clamp<int64_t>(top_k, 1, std::max(k, shape.total_tokens));
  return shape;
}

void PeanutShapes::Record(int64_t first, int64_t count, const DynamicTreeOptions& shape,
                          double alpha) {
  const int64_t end = std::min<int64_t>(first + count, static_cast<int64_t>(recorded_.size()));
  for (int64_t p = std::max<int64_t>(first, 0); p < end; ++p) recorded_[p] = {true, shape, alpha};
}

}  // namespace mulo::engine
