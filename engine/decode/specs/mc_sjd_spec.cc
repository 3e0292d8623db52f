#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry McSjdSpec() {
  MethodEntry e;
  e.name = "mc_sjd";
  e.summary = "MC-SJD: SJD whose re-drawn drafts keep their token under a maximal coupling "
              "(lossless)";
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const McSjdDecoder>(c.mc_sjd); };
  e.options = {
      Integer("window", 1, kMaxJacobiWindow,
              [](MethodConfig& c) -> int64_t& { return c.mc_sjd.window; }),
      Choice<JacobiInit>("init",
                         {{"RANDOM", JacobiInit::kRandom},
                          {"REPEAT_HORIZON", JacobiInit::kRepeatHorizon}},
                         [](MethodConfig& c) -> JacobiInit& { return c.mc_sjd.init; }),
      Number("coupling", 0, 1, [](MethodConfig& c) -> double& { return c.mc_sjd.coupling; }),
  };
  e.label_options = {"window", "coupling"};
  e.lossless = [](const MethodConfig&) { return true; };
  return e;
}

}  // namespace mulo::engine::specs
