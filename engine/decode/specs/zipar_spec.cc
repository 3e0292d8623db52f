#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry ZipArSpec() {
  MethodEntry e;
  e.name = "zipar";
  e.summary = "ZipAR: rows advance in parallel once the row above is `window` ahead";
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const ZipArDecoder>(c.zipar); };
  e.drafts = false;
  // The upper bound is the family's grid width, checked by the method (ZipArDecoder::Validate).
  e.options = {
      Integer("window", 1, kUnbounded, [](MethodConfig& c) -> int64_t& { return c.zipar.window; }),
  };
  e.label_options = {"window"};
  return e;
}

}  // namespace mulo::engine::specs
