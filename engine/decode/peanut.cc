#include "engine/decode/peanut.h"

#include <utility>

namespace mulo::engine {
namespace {

EagleOptions TreeOf(const PeanutMethodOptions& o) {
  EagleOptions tree;
  tree.dynamic = o.tree;
  tree.accept = o.accept;
  tree.peanut = o.shape;
  if (o.lantern_delta > 0.0) {
    tree.relaxation = PoolingRule{Pooling::kAdditive, o.lantern_k, o.lantern_delta};
  }
  return tree;
}

}  // namespace

Status ValidatePeanutOptions(const PeanutMethodOptions& o) {
  const PeanutOptions& s = o.shape;
  if (!(s.beta > 0.0) || s.beta > 1e6) return InvalidArgumentError("peanut.beta: must be > 0");
  if (s.l_d < 0 || s.l_d > 32) return InvalidArgumentError("peanut.l_d: must be in [0, 32]");
  if (s.l_k < 0 || s.l_k > 64) return InvalidArgumentError("peanut.l_k: must be in [0, 64]");
  // Open bounds: a depth (width) strictly between them must exist, and stay within what
  // EAGLE's trees accept (depth <= 32, top_k <= 64).
  if (s.min_depth < 0 || s.min_depth > 31) {
    return InvalidArgumentError("peanut.min_depth: must be in [0, 31]");
  }
  if (s.max_depth < s.min_depth + 2 || s.max_depth > 33) {
    return InvalidArgumentError("peanut.max_depth: must be in [min_depth + 2, 33] (open bounds)");
  }
  if (s.min_top_k < 0 || s.min_top_k > 63) {
    return InvalidArgumentError("peanut.min_top_k: must be in [0, 63]");
  }
  if (s.max_top_k < s.min_top_k + 2 || s.max_top_k > 65) {
    return InvalidArgumentError("peanut.max_top_k: must be in [min_top_k + 2, 65] (open bounds)");
  }
  if (!(o.lantern_delta >= 0.0 && o.lantern_delta <= 1.0)) {
    return InvalidArgumentError("peanut.lantern_delta: must be in [0, 1]");
  }
  if (o.lantern_k < 0 || o.lantern_k > kMaxNeighbours) {
    return InvalidArgumentError("peanut.lantern_k: must be in [0, " +
                                std::to_string(kMaxNeighbours) + "]");
  }
  EagleOptions tree;
  tree.dynamic = o.tree;
  return ValidateEagleOptions(tree, "peanut.tree");
}

PeanutDecoder::PeanutDecoder(PeanutMethodOptions options)
    : EagleDecoder(TreeOf(options)), peanut_(std::move(options)) {}

Status PeanutDecoder::Validate(const ModelSet& models) const {
  MULO_RETURN_IF_ERROR(ValidatePeanutOptions(peanut_));
  return EagleDecoder::Validate(models);
}

}  // namespace mulo::engine
