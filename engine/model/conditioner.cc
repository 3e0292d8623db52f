#include "engine/model/conditioner.h"

namespace mulo::engine {

const char* ConditionFormField(ConditionForm form) {
  switch (form) {
    case ConditionForm::kPrompt:
      return "prompt";
    case ConditionForm::kPromptIds:
      return "prompt_ids";
    case ConditionForm::kCaptionIds:
      return "caption_ids";
    case ConditionForm::kTaTokIds:
      return "condition_tokens";
    case ConditionForm::kFeatures:
      return "condition";
    case ConditionForm::kClassLabel:
      return "class_label";
  }
  return "condition";
}

ConditionForm FormOf(const Condition& condition) {
  if (!condition.prompt.empty()) return ConditionForm::kPrompt;
  if (!condition.prompt_ids.empty()) return ConditionForm::kPromptIds;
  if (!condition.caption_ids.empty()) return ConditionForm::kCaptionIds;
  if (!condition.ta_tok_ids.empty()) return ConditionForm::kTaTokIds;
  if (condition.class_label >= 0) return ConditionForm::kClassLabel;
  return ConditionForm::kFeatures;
}

}  // namespace mulo::engine
