#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry SjdSpec() {
  MethodEntry e;
  e.name = "sjd";
  e.summary = "speculative Jacobi decoding, no draft model (lossless)";
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const SjdDecoder>(c.sjd); };
  e.options = JacobiWindowOptions([](MethodConfig& c) -> int64_t& { return c.sjd.window; },
                                  [](MethodConfig& c) -> JacobiInit& { return c.sjd.init; });
  e.label_options = {"window", "init"};
  e.lossless = [](const MethodConfig&) { return true; };
  return e;
}

}  // namespace mulo::engine::specs
