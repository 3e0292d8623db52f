#include "engine/decode/auto_method.h"

#include <cstdio>

#include "engine/decode/method_registry.h"

namespace mulo::engine {
namespace {

std::string Fixed(double value, const char* format) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

std::string CalibrationDevice(const ModelSet& models) {
  return models.target != nullptr && models.target->token_embedding_weight().is_cuda() ? "cuda"
                                                                                        : "cpu";
}

StatusOr<AutoChoice> ChooseAutoMethod(const AutoOptions& options, const ModelSet& models,
                                      const MethodConfig& defaults) {
  const std::string device = CalibrationDevice(models);
  const std::string where = models.name + " family.json method_defaults.auto.calibration." +
                            device + ".methods";
  const nlohmann::json& auto_defaults = models.method_defaults.contains("auto")
                                            ? models.method_defaults["auto"]
                                            : nlohmann::json::object();
  const nlohmann::json* table = nullptr;
  if (auto_defaults.is_object() && auto_defaults.contains("calibration") &&
      auto_defaults["calibration"].is_object() &&
      auto_defaults["calibration"].contains(device) &&
      auto_defaults["calibration"][device].is_object() &&
      auto_defaults["calibration"][device].contains("methods")) {
    table = &auto_defaults["calibration"][device]["methods"];
  }
  if (table == nullptr) {
    return AutoChoice{kBaselineMethod, "auto: " + models.name + "'s family.json has no " + device +
                                           " calibration (tools/synth/calibrate_auto.py): ran ar"};
  }
  if (!table->is_object()) return FailedPreconditionError(where + ": must be an object");
  const char* budget = options.relaxed                    ? "of any quality"
                       : options.max_quality_loss.has_value() ? "within the quality budget"
                                                              : "lossless";
  AutoChoice best{kBaselineMethod, ""};
  double best_speedup = 1.0;
  for (const std::string& name : AvailableMethods(models)) {
    const MethodEntry& entry = *FindMethod(name);
    if (!entry.make || !table->contains(name)) continue;  // auto itself; unmeasured methods
    const nlohmann::json& row = (*table)[name];
    for (const char* field : {"speedup", "syntheval_delta"}) {
      if (!row.is_object() || !row.contains(field) || !row[field].is_number()) {
        return FailedPreconditionError(where + "." + name + "." + field + ": must be a number");
      }
    }
    const double speedup = row["speedup"].get<double>();
    const double loss = -row["syntheval_delta"].get<double>();
    const bool lossless = entry.lossless && entry.lossless(defaults);
    const bool allowed = lossless || options.relaxed ||
                         (options.max_quality_loss.has_value() && loss <= *options.max_quality_loss);
    if (allowed && speedup > best_speedup) {
      best = {name, ""};
      best_speedup = speedup;
    }
  }
  best.reason = "auto: " + best.method + ", the fastest " + budget + " method of " +
                models.name + "'s " + device + " calibration (" + Fixed(best_speedup, "%.2f") +
                "x ar)";
  return best;
}

}  // namespace mulo::engine
