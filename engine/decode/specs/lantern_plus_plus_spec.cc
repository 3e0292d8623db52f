#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry LanternPlusPlusSpec() {
  MethodEntry e;
  e.name = "lantern++";
  e.summary = "LANTERN++: static tree with multiplicative latent relaxation (lambda)";
  e.needs = {Component::kEagle};
  e.implemented = true;
  e.make = [](const MethodConfig& c) {
    return std::make_shared<const LanternPlusPlusDecoder>(c.lantern_plus_plus);
  };
  e.options = {
      Integer("k", 0, kMaxNeighbours,
              [](MethodConfig& c) -> int64_t& { return c.lantern_plus_plus.k; }),
      Number("lambda", 1, kUnbounded,
             [](MethodConfig& c) -> double& { return c.lantern_plus_plus.lambda; },
             "must be a finite number >= 1"),
  };
  e.label_options = {"k", "lambda"};
  e.bench_variants = {{"lambda=3"}};
  return e;
}

}  // namespace mulo::engine::specs
