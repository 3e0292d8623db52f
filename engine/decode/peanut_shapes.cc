#include "engine/decode/peanut_shapes.h"

#include <algorithm>
#include <set>
#include <utility>

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
  return Adapted(options_, neighbour.shape, neighbour.alpha >= options_.beta);
}

DynamicTreeOptions PeanutShapes::Adapted(const PeanutOptions& options, DynamicTreeOptions from,
                                         bool positive) {
  const int64_t depth = from.depth + (positive ? options.l_d : -options.l_d);
  const int64_t top_k = from.top_k + (positive ? -options.l_k : options.l_k);
  // The bounds stop a step from leaving them; a shape that starts outside them (an initial
  // tree the bounds exclude) is not moved by them.
  const int64_t d = from.depth, k = from.top_k;
  DynamicTreeOptions shape = from;
  shape.depth = std::clamp(depth, std::min(d, options.min_depth + 1),
                           std::max(d, options.max_depth - 1));
  // At depth 1 the paper lifts the width bound (a one-layer tree's cost does not grow with the
  // square of its width). The width still stops at total_tokens: the tree keeps its
  // total_tokens best nodes, each of them within its parent's top total_tokens children
  // (siblings that outscore it are kept too), so more width drafts the same tree, only slower,
  // and a hard region (alpha < beta step after step) would grow it without limit.
  shape.top_k = depth > 1 ? std::clamp(top_k, std::min(k, options.min_top_k + 1),
                                       std::max(k, options.max_top_k - 1))
                          : std::clamp<int64_t>(top_k, 1, std::max(k, shape.total_tokens));
  return shape;
}

std::vector<DynamicTreeOptions> PeanutShapes::Reachable(const PeanutOptions& options,
                                                        const DynamicTreeOptions& initial) {
  const auto key = [](const DynamicTreeOptions& s) { return std::make_pair(s.depth, s.top_k); };
  std::set<std::pair<int64_t, int64_t>> seen;
  std::vector<DynamicTreeOptions> queue;
  const auto visit = [&](const DynamicTreeOptions& shape) {
    if (seen.insert(key(shape)).second) queue.push_back(shape);
  };
  visit(initial);
  // Random initialisation's draws: every depth and width strictly inside the bounds (the
  // lowest inner value when the bounds leave none).
  if (options.init == PeanutInit::kRandom) {
    const int64_t deepest = std::max(options.min_depth + 1, options.max_depth - 1);
    const int64_t widest = std::max(options.min_top_k + 1, options.max_top_k - 1);
    for (int64_t d = options.min_depth + 1; d <= deepest; ++d) {
      for (int64_t k = options.min_top_k + 1; k <= widest; ++k) {
        visit({initial.total_tokens, d, k});
      }
    }
  }
  for (size_t i = 0; i < queue.size(); ++i) {
    for (bool positive : {true, false}) visit(Adapted(options, queue[i], positive));
  }
  for (size_t i = 0, reached = queue.size(); i < reached; ++i) {
    for (int64_t d = 0; d < queue[i].depth; ++d) visit({queue[i].total_tokens, d, queue[i].top_k});
  }
  return queue;
}

void PeanutShapes::Record(int64_t first, int64_t count, const DynamicTreeOptions& shape,
                          double alpha) {
  const int64_t end = std::min<int64_t>(first + count, static_cast<int64_t>(recorded_.size()));
  for (int64_t p = std::max<int64_t>(first, 0); p < end; ++p) recorded_[p] = {true, shape, alpha};
}

}  // namespace mulo::engine
