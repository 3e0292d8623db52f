#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry ArSpec() {
  MethodEntry e;
  e.name = "ar";
  e.summary = "plain autoregressive decoding, one token per target forward (the baseline)";
  e.implemented = true;
  e.make = [](const MethodConfig&) { return std::make_shared<const ArDecoder>(); };
  e.drafts = false;
  e.lossless = [](const MethodConfig&) { return true; };
  return e;
}

}  // namespace mulo::engine::specs
