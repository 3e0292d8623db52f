#include "text/janus_prompt_encoder.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "text/bpe_tokenizer.h"
#include "text/janus_prompt.h"

namespace mulo::text {
namespace {

class JanusPromptEncoder final : public PromptEncoder {
 public:
  JanusPromptEncoder(std::unique_ptr<BpeTokenizer> tokenizer, int32_t bos_id, int64_t rows)
      : tokenizer_(std::move(tokenizer)), bos_id_(bos_id), rows_(rows) {}

  absl::Status Encode(std::string_view prompt, engine::Condition& condition) const override {
    // Upstream: tokenizer.encode(prompt) puts the begin-of-sentence token first.
    auto ids = tokenizer_->Encode(JanusT2iPrompt(prompt), "prompt");
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
  std::unique_ptr<BpeTokenizer> tokenizer_;
  int32_t bos_id_;
  int64_t rows_;  // the language model's positions before the image codes
};

}  // namespace

absl::StatusOr<std::unique_ptr<PromptEncoder>> MakeJanusPromptEncoder(
    const std::string& dir, const engine::ModelSet& models) {
  auto component = FamilyComponentDir(dir, "target");
  if (!component.ok()) return component.status();
  const std::string path = *component + "/tokenizer.json";
  auto tokenizer = BpeTokenizer::LoadFile(path);
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
    return absl::FailedPreconditionError(
        absl::StrCat(config_path, ": bos_id: missing or outside the tokenizer's ",
                     (*tokenizer)->size(), " ids (convert.py janus-family writes it)"));
  }
  return std::make_unique<JanusPromptEncoder>(*std::move(tokenizer),
                                              config["bos_id"].get<int32_t>(),
                                              models.target->condition_shape().rows);
}

}  // namespace mulo::text
