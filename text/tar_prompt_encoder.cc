#include "text/tar_prompt_encoder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "text/bpe_tokenizer.h"
#include "text/tar_prompt.h"

namespace mulo::text {
namespace {

// The scale whose code count is `codes`; families of another count (the tests' tiny ones)
// ask with scale 0's token.
int TarScaleFor(int64_t codes) {
  for (int scale = 0; scale <= 2; ++scale) {
    auto count = TarCodeCount(scale);
    if (count.ok() && *count == codes) return scale;
  }
  return 0;
}

class TarPromptEncoder final : public PromptEncoder {
 public:
  TarPromptEncoder(std::unique_ptr<BpeTokenizer> tokenizer, int scale, int64_t rows)
      : tokenizer_(std::move(tokenizer)), scale_(scale), rows_(rows) {}

  absl::Status Encode(std::string_view prompt, engine::Condition& condition) const override {
    auto text = TarT2iPrompt(prompt, scale_);
    if (!text.ok()) return text.status();
    auto ids = tokenizer_->Encode(*text, "prompt");
    if (!ids.ok()) return ids.status();
    if (static_cast<int64_t>(ids->size()) > rows_) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt: ", ids->size(),
                       " tokens with Tar's chat template, more than the MLLM's ", rows_));
    }
    condition.prompt_ids.assign(ids->begin(), ids->end());
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<BpeTokenizer> tokenizer_;
  int scale_;
  int64_t rows_;  // the MLLM's positions
};

}  // namespace

absl::StatusOr<std::unique_ptr<PromptEncoder>> MakeTarPromptEncoder(
    const std::string& dir, const engine::ModelSet& models) {
  auto component = FamilyComponentDir(dir, "mllm");
  if (!component.ok()) return component.status();
  const std::string path = *component + "/tokenizer.json";
  auto tokenizer = BpeTokenizer::LoadFile(path);
  if (!tokenizer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": the MLLM's tokenizer (convert.py hf-causal-lm copies it): ",
                     tokenizer.status().message()));
  }
  const engine::TokenModel& mllm = *models.mllm_stage->target;
  return std::make_unique<TarPromptEncoder>(
      *std::move(tokenizer), TarScaleFor(mllm.num_image_tokens()), mllm.condition_shape().rows);
}

}  // namespace mulo::text
