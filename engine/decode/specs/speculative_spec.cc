#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry SpeculativeSpec() {
  MethodEntry e;
  e.name = "speculative";
  e.summary = "speculative decoding with the chain draft model (lossless)";
  e.needs = {Component::kChain};
  e.implemented = true;
  e.make = [](const MethodConfig& c) {
    return std::make_shared<const SpeculativeDecoder>(c.speculative);
  };
  e.options = {
      Integer("gamma", 1, kMaxGamma, [](MethodConfig& c) -> int64_t& { return c.speculative.gamma; }),
  };
  e.label_options = {"gamma"};
  e.lossless = [](const MethodConfig&) { return true; };
  return e;
}

}  // namespace mulo::engine::specs
