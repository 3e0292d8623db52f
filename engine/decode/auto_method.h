// `method: auto`: the fastest method that a family's calibration table measured on this device,
// within a quality budget, so that a user need not know which of the methods is fastest on
// their hardware. The table is family.json's method_defaults.auto.calibration.<device> ("cpu",
// "cuda"): {"methods": {name: {"speedup", "syntheval_delta", "syntheval_delta_se"}}}, written
// by tools/synth/calibrate_auto.py from methods_bench on validation prompts (never the held-out
// ones). Which methods are lossless is each spec's to say (MethodEntry::lossless at the
// family's defaults), never the table's: without a budget, auto picks among those only.
#ifndef MULO_ENGINE_DECODE_AUTO_METHOD_H_
#define MULO_ENGINE_DECODE_AUTO_METHOD_H_

#include <optional>
#include <string>

#include "engine/core/status.h"
#include "engine/model/model_set.h"

namespace mulo::engine {

struct MethodConfig;  // method_registry.h

struct AutoOptions {
  // Relaxed methods may run when their measured SynthEval loss against ar is at most this
  // many points; unset: lossless methods only.
  std::optional<double> max_quality_loss;
  bool relaxed = false;  // any method the table measured, whatever its quality
};

struct AutoChoice {
  std::string method;  // what runs
  std::string reason;  // why, for the response and the log
};

// The device a calibration table is kept for: "cuda" when the family's target lives on a GPU,
// "cpu" otherwise.
std::string CalibrationDevice(const ModelSet& models);

// The fastest method of the table for CalibrationDevice(models) that `options` allow among the
// methods `models` can run, judged lossless or not at `defaults` (the family's default
// config); ar (1x) when none is faster or the family has no table for the device (the reason
// says which). FAILED_PRECONDITION naming the field when the table is malformed.
StatusOr<AutoChoice> ChooseAutoMethod(const AutoOptions& options, const ModelSet& models,
                                      const MethodConfig& defaults);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_AUTO_METHOD_H_
