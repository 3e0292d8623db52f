#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry AutoSpec() {
  MethodEntry e;
  e.name = "auto";
  e.summary = "the fastest method the family's calibration measured on this device within a "
              "quality budget (lossless methods only by default)";
  e.implemented = true;
  e.resolve = [](const MethodConfig& c, const ModelSet& models) -> StatusOr<MethodConfig> {
    MULO_ASSIGN_OR_RETURN(MethodConfig defaults, DefaultMethodConfig("ar", models));
    MULO_ASSIGN_OR_RETURN(AutoChoice choice, ChooseAutoMethod(c.automatic, models, defaults));
    MULO_ASSIGN_OR_RETURN(MethodConfig chosen, DefaultMethodConfig(choice.method, models));
    chosen.chosen_by = choice.reason;
    return chosen;
  };
  e.options = {
      OptionalNumber("max_quality_loss", 0, 100,
                     [](MethodConfig& c) -> std::optional<double>& {
                       return c.automatic.max_quality_loss;
                     }),
      Boolean("relaxed", [](MethodConfig& c) -> bool& { return c.automatic.relaxed; }),
  };
  e.drafts = false;
  return e;
}

}  // namespace mulo::engine::specs
