#include "server/prompt_encoder.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "text/bpe_tokenizer.h"
#include "text/clean_caption.h"
#include "text/janus_prompt.h"
#include "text/t5_tokenizer.h"
#include "text/tar_prompt.h"

namespace mulo::server {
namespace {

// The scale whose code count is `codes`; families of another count (the tests' tiny ones)
// ask with scale 0's token.
int TarScaleFor(int64_t codes) {
  for (int scale = 0; scale <= 2; ++scale) {
    auto count = text::TarCodeCount(scale);
    if (count.ok() && *count == codes) return scale;
  }
  return 0;
}

// <dir>/<the directory family.json names for `key`>.
absl::StatusOr<std::string> ComponentDir(const std::string& dir, const std::string& key) {
  const std::string path = dir + "/family.json";
  nlohmann::json family = nlohmann::json::parse(std::ifstream(path), nullptr, false);
  if (!family.is_object() || !family.contains("components") ||
      !family["components"].is_object() || !family["components"].contains(key) ||
      !family["components"][key].is_string()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": components.", key, ": no component directory"));
  }
  return dir + "/" + family["components"][key].get<std::string>();
}

class TarPromptEncoder final : public PromptEncoder {
 public:
  TarPromptEncoder(std::unique_ptr<text::BpeTokenizer> tokenizer, int scale, int64_t rows)
      : tokenizer_(std::move(tokenizer)), scale_(scale), rows_(rows) {}

  absl::Status Encode(std::string_view prompt, engine::Condition& condition) const override {
    auto text = text::TarT2iPrompt(prompt, scale_);
    if (!text.ok()) return text.status();
    auto ids = tokenizer_->Encode(*text, "prompt");
    if (!ids.ok()) return ids.status();
    if (static_cast<int64_t>(ids->size()) > rows_) {
      return absl::InvalidArgumentError(absl::StrCat("prompt: ", ids->size(),
                                                     " tokens with Tar's chat template, more "
                                                     "than the MLLM's ",
                                                     rows_));
    }
    condition.prompt_ids.assign(ids->begin(), ids->end());
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<text::BpeTokenizer> tokenizer_;
  int scale_;
  int64_t rows_;  // the MLLM's positions
};

class T5PromptEncoder final : public PromptEncoder {
 public:
  T5PromptEncoder(std::unique_ptr<text::CaptionCleaner> cleaner,
                  std::unique_ptr<text::T5Tokenizer> tokenizer, int64_t rows)
      : cleaner_(std::move(cleaner)), tokenizer_(std::move(tokenizer)), rows_(rows) {}

  absl::Status Encode(std::string_view prompt, engine::Condition& condition) const override {
    // Upstream truncates to the condition's rows (120), the end token kept last.
    auto tokens = tokenizer_->Encode(cleaner_->Clean(prompt), rows_, "prompt");
    if (!tokens.ok()) return tokens.status();
    condition.caption_ids.assign(tokens->ids.begin(), tokens->ids.begin() + tokens->length);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<text::CaptionCleaner> cleaner_;
  std::unique_ptr<text::T5Tokenizer> tokenizer_;
  int64_t rows_;
};

class JanusPromptEncoder final : public PromptEncoder {
 public:
  JanusPromptEncoder(std::unique_ptr<text::BpeTokenizer> tokenizer, int32_t bos_id, int64_t rows)
      : tokenizer_(std::move(tokenizer)), bos_id_(bos_id), rows_(rows) {}

  absl::Status Encode(std::string_view prompt, engine::Condition& condition) const override {
    // Upstream: tokenizer.encode(prompt) puts the begin-of-sentence token first.
    auto ids = tokenizer_->Encode(text::JanusT2iPrompt(prompt), "prompt");
    if (!ids.ok()) return ids.status();
    if (static_cast<int64_t>(ids->size()) + 1 > rows_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt: ", ids->size() + 1, " tokens with Janus-Pro's template, more than the ", rows_,
          " positions before the image"));
    }
    condition.prompt_ids.assign(1, bos_id_);
    condition.prompt_ids.insert(condition.prompt_ids.end(), ids->begin(), ids->end());
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<text::BpeTokenizer> tokenizer_;
  int32_t bos_id_;
  int64_t rows_;  // the language model's positions before the image codes
};

absl::StatusOr<std::unique_ptr<PromptEncoder>> ForJanus(const std::string& dir,
                                                        const engine::ModelSet& models) {
  auto component = ComponentDir(dir, "target");
  if (!component.ok()) return component.status();
  const std::string path = *component + "/tokenizer.json";
  auto tokenizer = text::BpeTokenizer::LoadFile(path);
  if (!tokenizer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": Janus-Pro's tokenizer (convert.py janus-family copies it): ",
                     tokenizer.status().message()));
  }
  // The begin-of-sentence id the converter read off the tokenizer's added tokens.
  const std::string config_path = *component + "/config.json";
  nlohmann::json config = nlohmann::json::parse(std::ifstream(config_path), nullptr, false);
  if (!config.is_object() || !config.contains("bos_id") || !config["bos_id"].is_number_integer() ||
      config["bos_id"].get<int64_t>() < 0 ||
      config["bos_id"].get<int64_t>() >= (*tokenizer)->size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        config_path, ": bos_id: missing or outside the tokenizer's ", (*tokenizer)->size(),
        " ids (convert.py janus-family writes it)"));
  }
  return std::make_unique<JanusPromptEncoder>(*std::move(tokenizer),
                                              config["bos_id"].get<int32_t>(),
                                              models.target->condition_shape().rows);
}

absl::StatusOr<std::unique_ptr<PromptEncoder>> ForTar(const std::string& dir,
                                                      const engine::ModelSet& models) {
  auto component = ComponentDir(dir, "mllm");
  if (!component.ok()) return component.status();
  const std::string path = *component + "/tokenizer.json";
  auto tokenizer = text::BpeTokenizer::LoadFile(path);
  if (!tokenizer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": the MLLM's tokenizer (convert.py hf-causal-lm copies it): ",
                     tokenizer.status().message()));
  }
  const engine::TokenModel& mllm = *models.mllm_stage->target;
  return std::make_unique<TarPromptEncoder>(*std::move(tokenizer),
                                            TarScaleFor(mllm.num_image_tokens()),
                                            mllm.condition_shape().rows);
}

absl::StatusOr<std::unique_ptr<PromptEncoder>> ForT5(const std::string& dir,
                                                     const engine::ModelSet& models) {
  auto component = ComponentDir(dir, "t5");
  if (!component.ok()) return component.status();
  const std::string path = *component + "/spiece.model";
  auto tokenizer = text::T5Tokenizer::Load(path);
  if (!tokenizer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": FLAN-T5's sentencepiece model (convert.py hf-t5-encoder copies "
                           "it): ",
                     tokenizer.status().message()));
  }
  auto cleaner = text::CaptionCleaner::Create();
  if (!cleaner.ok()) return cleaner.status();
  return std::make_unique<T5PromptEncoder>(*std::move(cleaner), *std::move(tokenizer),
                                           models.target->condition_shape().rows);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PromptEncoder>> PromptEncoder::ForFamily(
    const std::string& dir, const engine::ModelSet& models) {
  if (models.pipeline.empty()) {
    // A target that reads the prompt's text ids itself (Janus-Pro's language model), chosen by
    // the condition it declares, not by its architecture's name.
    if (models.target->condition_shape().mode == engine::ConditionMode::kPromptIds) {
      return ForJanus(dir, models);
    }
    return std::unique_ptr<PromptEncoder>();
  }
  switch (models.pipeline.front()->input()) {
    case engine::ConditionForm::kPromptIds:
      return ForTar(dir, models);
    case engine::ConditionForm::kCaptionIds:
      return ForT5(dir, models);
    default:
      return std::unique_ptr<PromptEncoder>();  // tokenised in the engine, or no text
  }
}

}  // namespace mulo::server
