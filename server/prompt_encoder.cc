#include "server/prompt_encoder.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
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

}  // namespace

absl::StatusOr<std::unique_ptr<PromptEncoder>> PromptEncoder::ForFamily(
    const std::string& dir, const engine::ModelSet& models) {
  if (models.mllm_stage == nullptr) return std::unique_ptr<PromptEncoder>();
  // family.json named the component; its directory holds the tokenizer.
  const std::string family_path = dir + "/family.json";
  nlohmann::json family = nlohmann::json::parse(std::ifstream(family_path), nullptr, false);
  const nlohmann::json* mllm =
      family.is_object() && family.contains("components") ? &family["components"] : nullptr;
  if (mllm == nullptr || !mllm->contains("mllm") || !(*mllm)["mllm"].is_string()) {
    return absl::FailedPreconditionError(
        absl::StrCat(family_path, ": components.mllm: no component directory"));
  }
  const std::string path = dir + "/" + (*mllm)["mllm"].get<std::string>() + "/tokenizer.json";
  auto tokenizer = text::BpeTokenizer::LoadFile(path);
  if (!tokenizer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": the MLLM's tokenizer (convert.py hf-causal-lm copies it): ",
                     tokenizer.status().message()));
  }
  const int scale = TarScaleFor(models.mllm_stage->target->num_image_tokens());
  return std::unique_ptr<PromptEncoder>(new PromptEncoder(*std::move(tokenizer), scale));
}

absl::StatusOr<std::vector<int64_t>> PromptEncoder::Encode(std::string_view prompt) const {
  auto text = text::TarT2iPrompt(prompt, scale_);
  if (!text.ok()) return text.status();
  auto ids = tokenizer_->Encode(*text, "prompt");
  if (!ids.ok()) return ids.status();
  return std::vector<int64_t>(ids->begin(), ids->end());
}

}  // namespace mulo::server
