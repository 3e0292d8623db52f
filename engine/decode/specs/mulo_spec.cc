#include "engine/decode/specs/method_specs.h"
#include "engine/decode/specs/option_builders.h"

namespace mulo::engine::specs {

MethodEntry MuloSpec() {
  MethodEntry e;
  e.name = "mulo";
  e.summary = "MuLo-SD: low-resolution drafter + up-sampler, pooled local verification (relaxed)";
  e.needs = {Component::kDrafter, Component::kUpsampler, Component::kDownsampler};
  e.implemented = true;
  e.make = [](const MethodConfig& c) { return std::make_shared<const MuloDecoder>(c.mulo); };
  OptionSpec preset;
  preset.name = "preset";
  preset.kind = OptionKind::kChoice;
  preset.choices = {"FAMILY", "PAPER"};
  preset.applies_first = true;
  // FAMILY is what a config starts from (DefaultMethodConfig); PAPER replaces every option.
  preset.get = [](const MethodConfig&) { return 0.0; };
  preset.set = [](MethodConfig& c, double v) {
    if (v == 1.0) c.mulo = PaperMuloOptions();
  };
  e.options = {
      preset,
      Number("tau", 0, kUnbounded, [](MethodConfig& c) -> double& { return c.mulo.tau; },
             "must be a finite number >= 0"),
      Integer("k", 0, kUnbounded, [](MethodConfig& c) -> int64_t& { return c.mulo.pooling.k; }),
      Number("delta", 0, 1, [](MethodConfig& c) -> double& { return c.mulo.pooling.delta; }),
      Number("lambda", 1, kUnbounded,
             [](MethodConfig& c) -> double& { return c.mulo.pooling.lambda; },
             "must be a finite number >= 1"),
      Choice<Pooling>("pooling",
                      {{"ADDITIVE", Pooling::kAdditive},
                       {"MULTIPLICATIVE", Pooling::kMultiplicative},
                       {"NO_POOLING", Pooling::kNone}},
                      [](MethodConfig& c) -> Pooling& { return c.mulo.pooling.kind; }),
      Integer("radius", 0, kUnbounded, [](MethodConfig& c) -> int64_t& { return c.mulo.radius; }),
      Integer("draft_rows", 1, kUnbounded,
              [](MethodConfig& c) -> int64_t& { return c.mulo.draft_rows; }),
      Choice<Rejection>("rejection", {{"LOCAL", Rejection::kLocal}, {"RASTER", Rejection::kRaster}},
                        [](MethodConfig& c) -> Rejection& { return c.mulo.rejection; }),
      Choice<DraftPrefix>("draft_prefix",
                          {{"DOWNSAMPLED", DraftPrefix::kDownsampled},
                           {"KEEP_DRAFTED", DraftPrefix::kKeepDrafted},
                           {"PATCH", DraftPrefix::kPatch},
                           {"OWN", DraftPrefix::kOwn}},
                          [](MethodConfig& c) -> DraftPrefix& { return c.mulo.prefix; }),
      OptionalNumber("draft_cfg_scale", 0, 100,
                     [](MethodConfig& c) -> std::optional<double>& {
                       return c.mulo.draft_cfg_scale;
                     }),
      OptionalNumber("draft_temperature", 0, 100,
                     [](MethodConfig& c) -> std::optional<double>& {
                       return c.mulo.draft_temperature;
                     }),
      Choice<ResampleOrder>("resample",
                            {{"SEQUENTIAL", ResampleOrder::kSequential},
                             {"PARALLEL", ResampleOrder::kParallel},
                             {"WAVEFRONT", ResampleOrder::kWavefront}},
                            [](MethodConfig& c) -> ResampleOrder& { return c.mulo.resample; }),
      Integer("parallel_radius", 0, kUnbounded,
              [](MethodConfig& c) -> int64_t& { return c.mulo.parallel_radius; }),
      Integer("zipar_window", 0, kUnbounded,
              [](MethodConfig& c) -> int64_t& { return c.mulo.zipar_window; }),
      Integer("resample_window", 1, kUnbounded,
              [](MethodConfig& c) -> int64_t& { return c.mulo.resample_window; }),
  };
  return e;
}

}  // namespace mulo::engine::specs
