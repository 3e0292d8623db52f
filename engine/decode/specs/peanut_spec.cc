#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry PeanutSpec() {
  MethodEntry e;
  e.name = "peanut";
  e.summary = "PEANUT: EAGLE-2 trees whose depth and width adapt to the neighbours' trees";
  e.needs = {Component::kEagle};
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const PeanutDecoder>(c.peanut); };
  OptionSpec static_tree = Declared("tree.static_tree", OptionKind::kBoolean, 0, 0,
                                    "PEANUT adapts dynamic (EAGLE-2) trees only");
  static_tree.get = [](const MethodConfig&) { return 0.0; };
  static_tree.set = [](MethodConfig&, double) {};
  e.options = {
      Number("beta", std::numeric_limits<double>::min(), 1e6,
             [](MethodConfig& c) -> double& { return c.peanut.shape.beta; }, "must be > 0"),
      Integer("l_d", 0, 32, [](MethodConfig& c) -> int64_t& { return c.peanut.shape.l_d; }),
      Integer("l_k", 0, 64, [](MethodConfig& c) -> int64_t& { return c.peanut.shape.l_k; }),
      Integer("min_depth", 0, 31,
              [](MethodConfig& c) -> int64_t& { return c.peanut.shape.min_depth; }),
      Integer("max_depth", 2, 33,
              [](MethodConfig& c) -> int64_t& { return c.peanut.shape.max_depth; },
              "must be in [min_depth + 2, 33] (open bounds)"),
      Integer("min_top_k", 0, 63,
              [](MethodConfig& c) -> int64_t& { return c.peanut.shape.min_top_k; }),
      Integer("max_top_k", 2, 65,
              [](MethodConfig& c) -> int64_t& { return c.peanut.shape.max_top_k; },
              "must be in [min_top_k + 2, 65] (open bounds)"),
      static_tree,
      Choice<PeanutInit>("init",
                         {{"HORIZONTAL_REPEAT", PeanutInit::kHorizontalRepeat},
                          {"VERTICAL_REPEAT", PeanutInit::kVerticalRepeat},
                          {"RANDOM", PeanutInit::kRandom}},
                         [](MethodConfig& c) -> PeanutInit& { return c.peanut.shape.init; }),
      Number("lantern_delta", 0, 1,
             [](MethodConfig& c) -> double& { return c.peanut.lantern_delta; }),
  };
  for (OptionSpec& o : TreeSizeOptions(
           "tree.", [](MethodConfig& c) -> DynamicTreeOptions& { return c.peanut.tree; })) {
    e.options.push_back(std::move(o));
  }
  e.label_options = {"beta", "l_d", "l_k", "init", "tree.total_tokens", "tree.depth",
                     "tree.top_k"};
  // The initial tree, and the widest it adapts to: the shapes stay strictly inside
  // (min_depth, max_depth) x (min_top_k, max_top_k).
  e.tree_demands = [](const MethodConfig& c) {
    std::vector<TreeDemand> demands = DynamicTreeDemands(c.peanut.tree, "peanut.tree.");
    const PeanutOptions& shape = c.peanut.shape;
    demands.push_back({"peanut.max_top_k",
                       "adapted trees up to depth " + std::to_string(shape.max_depth - 1) +
                           " x top_k " + std::to_string(shape.max_top_k - 1),
                       (shape.max_depth - 1) * (shape.max_top_k - 1)});
    return demands;
  };
  // PEANUT + LANTERN pools LANTERN's neighbourhood: the family's LANTERN k (no k of its own).
  e.derive_defaults = [](MethodConfig& c) { c.peanut.lantern_k = c.lantern.k; };
  e.lossless = [](const MethodConfig& c) { return c.peanut.lantern_delta == 0.0; };
  return e;
}

}  // namespace mulo::engine::specs
