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
  e.options =
      JacobiWindowOptions([](MethodConfig& c) -> int64_t& { return c.mc_sjd.window; },
                          [](MethodConfig& c) -> JacobiInit& { return c.mc_sjd.init; });
  e.options.push_back(
      Number("coupling", 0, 1, [](MethodConfig& c) -> double& { return c.mc_sjd.coupling; }));
  e.label_options = {"window", "coupling"};
  e.lossless = [](const MethodConfig&) { return true; };
  return e;
}

}  // namespace mulo::engine::specs
