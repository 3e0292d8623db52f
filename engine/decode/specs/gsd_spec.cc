#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry GsdSpec() {
  MethodEntry e;
  e.name = "gsd";
  e.summary = "grouped speculative decoding: SJD with group acceptance (relaxed)";
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const GsdDecoder>(c.gsd); };
  e.options = {
      Integer("window", 1, kMaxJacobiWindow, [](MethodConfig& c) -> int64_t& { return c.gsd.window; }),
      Integer("group_size", 1, 1024,
              [](MethodConfig& c) -> int64_t& { return c.gsd.group.size; }),
      Number("max_probability_gap", 0, 1,
             [](MethodConfig& c) -> double& { return c.gsd.group.max_probability_gap; }),
      Number("max_embedding_distance", 0, 1e12,
             [](MethodConfig& c) -> double& { return c.gsd.group.max_embedding_distance; }),
  };
  e.label_options = {"window", "group_size", "max_probability_gap", "max_embedding_distance"};
  return e;
}

}  // namespace mulo::engine::specs
