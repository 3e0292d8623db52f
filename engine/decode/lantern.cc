#include "engine/decode/lantern.h"

#include <utility>

#include "engine/model/json_fields.h"

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

StatusOr<LanternOptions> FamilyLanternOptions(const ModelSet& models) {
  LanternOptions o;
  if (!models.method_defaults.contains("lantern")) return o;
  JsonFields f(models.method_defaults["lantern"],
               models.name + " family.json method_defaults.lantern");
  MULO_ASSIGN_OR_RETURN(o.k, f.Int("k", 0, kMaxNeighbours, o.k));
  MULO_ASSIGN_OR_RETURN(o.delta, f.Number("delta", 0.0, 1.0, o.delta));
  return o;
}

StatusOr<LanternPlusPlusOptions> FamilyLanternPlusPlusOptions(const ModelSet& models) {
  LanternPlusPlusOptions o;
  if (!models.method_defaults.contains("lantern++")) return o;
  JsonFields f(models.method_defaults["lantern++"],
               models.name + " family.json method_defaults.lantern++");
  MULO_ASSIGN_OR_RETURN(o.k, f.Int("k", 0, kMaxNeighbours, o.k));
  MULO_ASSIGN_OR_RETURN(o.lambda, f.Number("lambda", 1.0, 1e6, o.lambda));
  return o;
}

Status ValidateLanternOptions(const LanternOptions& o) {
  if (o.k < 0 || o.k > kMaxNeighbours) return InvalidArgumentError("lantern.k: must be in [0, " + std::to_string(kMaxNeighbours) + "]");
  const PoolingRule rule{Pooling::kAdditive, o.k, o.delta};
  MULO_RETURN_IF_ERROR(rule.Validate("lantern"));
  return ValidateEagleOptions(o.tree, "lantern.tree");
}

Status ValidateLanternPlusPlusOptions(const LanternPlusPlusOptions& o) {
  if (o.k < 0 || o.k > kMaxNeighbours) return InvalidArgumentError("lantern++.k: must be in [0, " + std::to_string(kMaxNeighbours) + "]");
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
