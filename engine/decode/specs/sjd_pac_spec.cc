#include "engine/decode/pac_tree_size.h"
#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry SjdPacSpec() {
  MethodEntry e;
  e.name = "sjd_pac";
  e.summary = "SJD-PAC: MC-SJD whose window starts with a tree of extra candidates drawn "
              "without replacement (lossless)";
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const SjdPacDecoder>(c.sjd_pac); };
  e.options =
      JacobiWindowOptions([](MethodConfig& c) -> int64_t& { return c.sjd_pac.window; },
                          [](MethodConfig& c) -> JacobiInit& { return c.sjd_pac.init; });
  e.options.push_back(
      Number("coupling", 0, 1, [](MethodConfig& c) -> double& { return c.sjd_pac.coupling; }));
  e.options.push_back(
      Integer("width", 1, 16, [](MethodConfig& c) -> int64_t& { return c.sjd_pac.width; }));
  // The tree's size (width + width^2 + ... + width^(depth - 1) at most 256) is checked by
  // SjdPacDecoder::Validate, naming sjd_pac.depth.
  e.options.push_back(
      Integer("depth", 1, 8, [](MethodConfig& c) -> int64_t& { return c.sjd_pac.depth; }));
  e.label_options = {"window", "width", "depth"};
  e.tree_demands = [](const MethodConfig& c) {
    return std::vector<TreeDemand>{
        {"sjd_pac.width",
         "a tree branching width " + std::to_string(c.sjd_pac.width) + " to depth " +
             std::to_string(c.sjd_pac.depth),
         PacTreeNodes(c.sjd_pac.width, c.sjd_pac.depth)}};
  };
  e.lossless = [](const MethodConfig&) { return true; };
  return e;
}

}  // namespace mulo::engine::specs
