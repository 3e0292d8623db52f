#include "engine/decode/lantern.h"

#include <utility>


namespace mulo::engine {
namespace {

EagleOptions TreeOf(const LanternOptions& o) {
  EagleOptions tree = o.tree;
  tree.relaxation = PoolingRule{Pooling::kAdditive, o.k, o.delta};
  return tree;
}

EagleOptions TreeOf(const LanternPlusPlusOptions& o) {
  EagleOptions tree;
  tree.static_tree = true;
  tree.accept = o.accept;
  tree.relaxation = PoolingRule{Pooling::kMultiplicative, o.k, 0.0, o.lambda};
  return tree;
}

}  // namespace

Status ValidateLanternOptions(const LanternOptions& o) {
  // k's upper bound is its spec's (lantern_spec.cc, checked by MakeMethod).
  const PoolingRule rule{Pooling::kAdditive, o.k, o.delta};
  MULO_RETURN_IF_ERROR(rule.Validate("lantern"));
  return ValidateEagleOptions(o.tree, "lantern.tree");
}

Status ValidateLanternPlusPlusOptions(const LanternPlusPlusOptions& o) {
  return PoolingRule{Pooling::kMultiplicative, o.k, 0.0, o.lambda}.Validate("lantern++");
}

LanternDecoder::LanternDecoder(LanternOptions options)
    : EagleDecoder(TreeOf(options)), lantern_(std::move(options)) {}

Status LanternDecoder::Validate(const ModelSet& models) const {
  MULO_RETURN_IF_ERROR(ValidateLanternOptions(lantern_));
  return EagleDecoder::Validate(models);
}

LanternPlusPlusDecoder::LanternPlusPlusDecoder(LanternPlusPlusOptions options)
    : EagleDecoder(TreeOf(options)), lantern_(std::move(options)) {}

Status LanternPlusPlusDecoder::Validate(const ModelSet& models) const {
  MULO_RETURN_IF_ERROR(ValidateLanternPlusPlusOptions(lantern_));
  return EagleDecoder::Validate(models);
}

}  // namespace mulo::engine
