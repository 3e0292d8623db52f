#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry EagleSpec() {
  MethodEntry e;
  e.name = "eagle";
  e.summary = "EAGLE-1 static / EAGLE-2 dynamic draft trees (lossless)";
  e.needs = {Component::kEagle};
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const EagleDecoder>(c.eagle); };
  e.options = EagleTreeOptions("", [](MethodConfig& c) -> EagleOptions& { return c.eagle; });
  e.label_options = {"static_tree", "total_tokens", "depth", "top_k"};
  e.bench_variants = {{"static_tree=true"}};
  e.tree_demands = [](const MethodConfig& c) {
    return c.eagle.static_tree ? std::vector<TreeDemand>{}
                               : DynamicTreeDemands(c.eagle.dynamic, "eagle.");
  };
  e.lossless = [](const MethodConfig&) { return true; };
  return e;
}

}  // namespace mulo::engine::specs
