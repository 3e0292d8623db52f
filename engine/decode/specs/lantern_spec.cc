#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry LanternSpec() {
  MethodEntry e;
  e.name = "lantern";
  e.summary = "LANTERN: EAGLE trees with latent-pooled relaxed acceptance (delta)";
  e.needs = {Component::kEagle};
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const LanternDecoder>(c.lantern); };
  e.options = {
      Integer("k", 0, kMaxNeighbours, [](MethodConfig& c) -> int64_t& { return c.lantern.k; }),
      Number("delta", 0, 1, [](MethodConfig& c) -> double& { return c.lantern.delta; }),
  };
  for (OptionSpec& o :
       EagleTreeOptions("tree.", [](MethodConfig& c) -> EagleOptions& { return c.lantern.tree; })) {
    e.options.push_back(std::move(o));
  }
  e.label_options = {"k", "delta"};
  e.tree_demands = [](const MethodConfig& c) {
    return c.lantern.tree.static_tree ? std::vector<TreeDemand>{}
                                      : DynamicTreeDemands(c.lantern.tree.dynamic, "lantern.tree.");
  };
  return e;
}

}  // namespace mulo::engine::specs
