#include "text/prompt_encoder.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "text/janus_prompt_encoder.h"
#include "text/t5_prompt_encoder.h"
#include "text/tar_prompt_encoder.h"

namespace mulo::text {
namespace {

using Factory = absl::StatusOr<std::unique_ptr<PromptEncoder>> (*)(const std::string& dir,
                                                                   const engine::ModelSet&);

// One row per encoder kind: the condition form it writes and whether it serves a pipeline's
// first stage (true) or a target that reads the prompt itself (false).
struct EncoderKind {
  engine::ConditionForm reads;
  bool first_stage;
  Factory make;
};

constexpr EncoderKind kKinds[] = {
    {engine::ConditionForm::kPromptIds, true, &MakeTarPromptEncoder},
    {engine::ConditionForm::kCaptionIds, true, &MakeT5PromptEncoder},
    {engine::ConditionForm::kPromptIds, false, &MakeJanusPromptEncoder},
};

// What the family's first model reads from a prompt, and whether that model is a stage.
std::optional<std::pair<engine::ConditionForm, bool>> PromptInput(const engine::ModelSet& models) {
  if (!models.pipeline.empty()) return std::make_pair(models.pipeline.front()->input(), true);
  if (models.target->condition_shape().mode == engine::ConditionMode::kPromptIds) {
    return std::make_pair(engine::ConditionForm::kPromptIds, false);
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PromptEncoder>> PromptEncoder::ForFamily(
    const std::string& dir, const engine::ModelSet& models) {
  const auto input = PromptInput(models);
  if (input.has_value()) {
    for (const EncoderKind& kind : kKinds) {
      if (kind.reads == input->first && kind.first_stage == input->second) {
        return kind.make(dir, models);
      }
    }
  }
  return std::unique_ptr<PromptEncoder>();  // tokenised in the engine, or no text
}

absl::StatusOr<std::string> FamilyComponentDir(const std::string& dir, const std::string& key) {
  const std::string path = dir + "/family.json";
  nlohmann::json family = nlohmann::json::parse(std::ifstream(path), nullptr, false);
  if (!family.is_object() || !family.contains("components") || !family["components"].is_object() ||
      !family["components"].contains(key) || !family["components"][key].is_string()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": components.", key, ": no component directory"));
  }
  return dir + "/" + family["components"][key].get<std::string>();
}

}  // namespace mulo::text
