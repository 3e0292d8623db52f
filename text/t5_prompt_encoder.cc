#include "text/t5_prompt_encoder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "text/clean_caption.h"
#include "text/t5_tokenizer.h"

namespace mulo::text {
namespace {

class T5PromptEncoder final : public PromptEncoder {
 public:
  T5PromptEncoder(std::unique_ptr<CaptionCleaner> cleaner, std::unique_ptr<T5Tokenizer> tokenizer,
                  int64_t rows)
      : cleaner_(std::move(cleaner)), tokenizer_(std::move(tokenizer)), rows_(rows) {}

  absl::Status Encode(std::string_view prompt, engine::Condition& condition) const override {
    // Upstream truncates to the condition's rows (120), the end token kept last.
    auto tokens = tokenizer_->Encode(cleaner_->Clean(prompt), rows_, "prompt");
    if (!tokens.ok()) return tokens.status();
    condition.caption_ids.assign(tokens->ids.begin(), tokens->ids.begin() + tokens->length);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<CaptionCleaner> cleaner_;
  std::unique_ptr<T5Tokenizer> tokenizer_;
  int64_t rows_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PromptEncoder>> MakeT5PromptEncoder(const std::string& dir,
                                                                   const engine::ModelSet& models) {
  auto component = FamilyComponentDir(dir, "t5");
  if (!component.ok()) return component.status();
  const std::string path = *component + "/spiece.model";
  auto tokenizer = T5Tokenizer::Load(path);
  if (!tokenizer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": FLAN-T5's sentencepiece model (convert.py hf-t5-encoder copies it): ",
                     tokenizer.status().message()));
  }
  auto cleaner = CaptionCleaner::Create();
  if (!cleaner.ok()) return cleaner.status();
  return std::make_unique<T5PromptEncoder>(*std::move(cleaner), *std::move(tokenizer),
                                           models.target->condition_shape().rows);
}

}  // namespace mulo::text
