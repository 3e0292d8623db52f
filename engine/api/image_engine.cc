#include "engine/api/image_engine.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/decode/auto_method.h"
#include "engine/decode/baseline_method.h"
#include "engine/decode/option_spec.h"

namespace mulo::engine {
namespace {

Status Invalid(const std::string& field, const std::string& problem) {
  return InvalidArgumentError(field + ": " + problem);
}

// The value `option` takes from `given`: its number, or for an option with choices the index
// of the chosen name.
StatusOr<double> OptionValue(const std::string& method, const OptionSpec& option,
                             const MethodOption& given) {
  if (option.choices.empty() || given.choice.empty()) return given.value;
  const auto at = std::find(option.choices.begin(), option.choices.end(), given.choice);
  if (at == option.choices.end()) {
    return Invalid(method + "." + option.name, given.choice + " is not " + option.ChoiceList());
  }
  return static_cast<double>(at - option.choices.begin());
}

// The request's options onto `config` through the method's specs, those marked applies_first
// (MuLo-SD's preset replaces the others) before the rest; each is held to its spec's bounds.
Status ApplyMethodOptions(const std::vector<MethodOption>& given, MethodConfig& config) {
  const MethodEntry* method = FindMethod(config.name);
  if (method == nullptr) return OkStatus();
  for (bool first : {true, false}) {
    for (const MethodOption& option : given) {
      const OptionSpec* spec = FindOption(method->options, option.name);
      if (spec == nullptr) {
        // The wire and the method's spec disagree: method_specs_test keeps them in step.
        return InternalError(method->name + "." + option.name + ": no engine option for it");
      }
      if (spec->applies_first != first) continue;
      MULO_ASSIGN_OR_RETURN(const double value, OptionValue(method->name, *spec, option));
      MULO_RETURN_IF_ERROR(spec->Check(method->name, value));
      spec->set(config, value);
    }
  }
  return OkStatus();
}

}  // namespace

std::vector<std::string> TextStageMethods(const ModelSet& stage) {
  std::vector<std::string> out;
  for (const std::string& name : AvailableMethods(stage)) {
    const MethodEntry* entry = FindMethod(name);
    if (entry == nullptr || !entry->make || !entry->lossless) continue;  // auto; relaxed ones
    auto config = DefaultMethodConfig(name, stage);
    if (config.ok() && entry->lossless(*config)) out.push_back(name);
  }
  return out;
}

StatusOr<std::unique_ptr<ImageEngine>> ImageEngine::Load(const std::string& dir,
                                                         const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(ModelSet models, LoadModelSet(dir, options));
  MULO_RETURN_IF_ERROR(ValidateMethodDefaults(models));
  return std::make_unique<ImageEngine>(std::move(models));
}

int64_t ImageEngine::grid_size() const { return models_.target->grid_size(); }

Status ImageEngine::PlanCondition(ImageRequest& request, ImagePlan& plan) const {
  const ConditionShape& target = models_.target->condition_shape();
  Condition& condition = request.condition;
  const bool has_features = !request.features.empty();
  const bool has_tokens = !condition.ta_tok_ids.empty();
  if (condition.caption_length != 0) {
    MULO_RETURN_IF_ERROR(CheckCaptionLength(target, condition.caption_length));
    if (!has_features) {
      return Invalid("caption_length", "applies to condition features; none were sent");
    }
  }
  if (target.mode == ConditionMode::kClassLabel) {
    if (condition.class_label < 0) {
      return Invalid("class_label", "required: this model draws one of " +
                                        std::to_string(target.num_classes) + " classes");
    }
    if (has_features || has_tokens) {
      return Invalid(has_features ? "condition" : "condition_tokens",
                     "this model takes class_label, not features or tokens");
    }
  }
  if (condition.class_label >= 0) {
    MULO_RETURN_IF_ERROR(CheckClassLabel(target, condition.class_label));
  } else if (has_tokens) {
    MULO_RETURN_IF_ERROR(CheckConditionTokens(models_, condition.ta_tok_ids));
  } else if (has_features) {
    if (target.mode == ConditionMode::kPromptIds) {
      return Invalid("condition", "this model reads the prompt's text; send prompt");
    }
    const int64_t want = target.rows * target.width;
    const int64_t got = static_cast<int64_t>(request.features.size());
    if (got != want) {
      return Invalid("condition", std::to_string(got) + " floats, expected " +
                                      std::to_string(target.rows) + " x " +
                                      std::to_string(target.width) + " = " + std::to_string(want));
    }
    for (float x : request.features) {
      if (!std::isfinite(x)) return Invalid("condition", "contains NaN or infinity");
    }
    condition.features = torch::tensor(request.features).view({target.rows, target.width});
  } else if (condition.prompt_ids.empty() && condition.caption_ids.empty()) {
    // The prompt's text for the engine's own text stage (the bundled family's encoder).
    if (request.prompt.empty()) {
      return Invalid("prompt", "required (or send condition or condition_tokens)");
    }
    if (models_.StageReading(ConditionForm::kPrompt) == nullptr) {
      return Invalid("prompt", "this model has no text conditioner; send condition features");
    }
    MULO_RETURN_IF_ERROR(models_.conditioner->Tokenize(request.prompt).status());
    plan.prompt = request.prompt;
  }
  plan.condition = std::move(condition);
  return OkStatus();
}

// The method with the family's defaults under the request's options; `auto` becomes the
// method it chooses for this family and device (chosen_by says why).
Status ImageEngine::PlanMethod(const ImageRequest& request, ImagePlan& plan) const {
  MULO_ASSIGN_OR_RETURN(MethodConfig config, DefaultMethodConfig(request.method, models_));
  MULO_RETURN_IF_ERROR(ApplyMethodOptions(request.method_options, config));
  MULO_ASSIGN_OR_RETURN(config, ResolveMethod(config, models_));
  // The registry checks the name, the family's components and every option's bounds.
  MULO_ASSIGN_OR_RETURN(plan.decoder, MakeMethod(config, models_));
  plan.method = config.name;
  plan.trees = TreeDemands(config);
  plan.method_config = std::move(config);
  return OkStatus();
}

Status ImageEngine::PlanTextStage(const ImageRequest& request, ImagePlan& plan) const {
  const std::string& name = request.text_stage_method;
  if (name.empty()) return OkStatus();
  if (models_.mllm_stage == nullptr || plan.condition.prompt_ids.empty()) {
    return Invalid("text_stage_method",
                   "applies to a prompt on a family whose text stage decodes (an MLLM stage)");
  }
  const ModelSet& stage = *models_.mllm_stage;
  const std::vector<std::string> methods = TextStageMethods(stage);
  if (std::find(methods.begin(), methods.end(), name) == methods.end()) {
    std::string known;
    for (const std::string& method : methods) known += (known.empty() ? "" : ", ") + method;
    return Invalid("text_stage_method", "\"" + name + "\" is not one of " + known);
  }
  MULO_ASSIGN_OR_RETURN(const MethodConfig config, DefaultMethodConfig(name, stage));
  MULO_ASSIGN_OR_RETURN(plan.text_stage_decoder, MakeMethod(config, stage));
  return OkStatus();
}

StatusOr<ImagePlan> ImageEngine::Plan(ImageRequest request) const {
  ImagePlan plan;
  MULO_RETURN_IF_ERROR(PlanCondition(request, plan));
  plan.sampling = request.sampling;
  if (request.family_cfg_scale) plan.sampling.cfg_scale = models_.default_cfg_scale;
  MULO_RETURN_IF_ERROR(ValidateSamplingParams(plan.sampling, models_.target->vocab_size()));
  MULO_RETURN_IF_ERROR(PlanMethod(request, plan));
  MULO_RETURN_IF_ERROR(PlanTextStage(request, plan));
  plan.kv_demand = RequestKvDemand(models_, plan.method, plan.sampling);
  return plan;
}

StatusOr<GenerateResult> ImageEngine::Run(const ImagePlan& plan, ProgressSink& progress,
                                          const CancelToken& cancel,
                                          GenerateOptions options) const {
  options.mllm_method = plan.text_stage_decoder.get();
  return plan.prompt.empty() ? GenerateImage(*plan.decoder, models_, plan.condition, plan.sampling,
                                             progress, cancel, options)
                             : GenerateImage(*plan.decoder, models_, plan.prompt, plan.sampling,
                                             progress, cancel, options);
}

StatusOr<RgbImage> ImageEngine::Preview(const std::vector<int32_t>& tokens, int64_t rows) const {
  return models_.vq->DecodeToRgb(tokens, rows, grid_size(), models_.pixel_rounding);
}

FamilyDescription ImageEngine::Describe() const {
  FamilyDescription out;
  const ConditionShape& target = models_.target->condition_shape();
  out.image_width = models_.ImageSize();
  out.image_height = models_.ImageSize();
  out.grid_size = grid_size();
  out.vocab_size = models_.target->vocab_size();
  out.methods = AvailableMethods(models_);
  out.default_cfg_scale = models_.default_cfg_scale;
  // A pipeline that starts from text (the engine's text encoder, or a stage whose ids a
  // text/ prompt encoder writes), or a target that reads the prompt's ids itself.
  if (!models_.pipeline.empty() && models_.pipeline.front()->reads_text()) {
    out.conditions.push_back("prompt");
  }
  if (target.mode == ConditionMode::kPromptIds) {
    out.conditions.push_back("prompt");
  } else if (target.mode != ConditionMode::kClassLabel) {
    out.conditions.push_back("condition");
    out.condition_width = target.width;
  } else {
    out.conditions.push_back("class_label");
    out.num_classes = target.num_classes;
  }
  if (models_.StageReading(ConditionForm::kTaTokIds) != nullptr) {
    out.conditions.push_back("condition_tokens");
  }
  out.condition_rows = target.rows;
  if (auto defaults = DefaultMethodConfig(kBaselineMethod, models_); defaults.ok()) {
    if (auto choice = ChooseAutoMethod(AutoOptions(), models_, *defaults); choice.ok()) {
      out.auto_method = choice->reason;
      out.auto_choice = choice->method;
    }
  }
  return out;
}

}  // namespace mulo::engine
