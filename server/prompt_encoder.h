// A text prompt -> the token ids a family's MLLM stage reads, for families whose prompt is
// tokenised outside the engine (the engine depends on LibTorch only). Today: Tar, whose MLLM
// (family.json components.mllm) ships Qwen2.5's tokenizer.json with Tar's added tokens beside
// its weights (tools/convert hf-causal-lm copies it); the prompt is Tar's t2i chat
// (text/tar_prompt.h) asking for the scale whose code count the family's target reads.
#ifndef MULO_SERVER_PROMPT_ENCODER_H_
#define MULO_SERVER_PROMPT_ENCODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_set.h"
#include "text/bpe_tokenizer.h"

namespace mulo::server {

class PromptEncoder {
 public:
  // The encoder of the family at `dir` (loaded as `models`): null when the family has no MLLM
  // stage; FAILED_PRECONDITION naming the file when its MLLM has no readable tokenizer.json.
  static absl::StatusOr<std::unique_ptr<PromptEncoder>> ForFamily(const std::string& dir,
                                                                  const engine::ModelSet& models);

  // The prompt's ids (INVALID_ARGUMENT naming "prompt" for text the tokenizer refuses).
  absl::StatusOr<std::vector<int64_t>> Encode(std::string_view prompt) const;

  // Tar's scale the prompt asks for (0, 1, 2 for 729, 169, 81 codes).
  int scale() const { return scale_; }

 private:
  PromptEncoder(std::unique_ptr<text::BpeTokenizer> tokenizer, int scale)
      : tokenizer_(std::move(tokenizer)), scale_(scale) {}

  std::unique_ptr<text::BpeTokenizer> tokenizer_;
  int scale_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_PROMPT_ENCODER_H_
