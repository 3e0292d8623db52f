// A text prompt -> what the first stage of a family's condition pipeline reads, for families
// whose prompt is tokenised outside the engine (the engine depends on LibTorch only):
//   - Tar (components.mllm): Qwen2.5's tokenizer.json with Tar's added tokens, which
//     `convert.py hf-causal-lm` copies beside the MLLM's weights, over Tar's t2i chat prompt
//     (text/tar_prompt.h) asking for the scale whose code count the target reads -> prompt_ids;
//   - LlamaGen t2i (components.t5): the caption cleaned as upstream (text/clean_caption.h,
//     twice) and cut into FLAN-T5's sentencepiece pieces (spiece.model, which
//     `convert.py hf-t5-encoder` copies), the end token, truncated to the condition's rows
//     -> caption_ids;
//   - Janus-Pro (a target of architecture "janus", no pipeline): the tokenizer.json that
//     `convert.py janus-family` copies beside the target, over Janus-Pro's t2i prompt
//     (text/janus_prompt.h), the begin-of-sentence id (the target's config.json bos_id) first
//     -> prompt_ids.
#ifndef MULO_SERVER_PROMPT_ENCODER_H_
#define MULO_SERVER_PROMPT_ENCODER_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/model_set.h"

namespace mulo::server {

class PromptEncoder {
 public:
  virtual ~PromptEncoder() = default;

  // The encoder of the family at `dir` (loaded as `models`), chosen by its pipeline's first
  // stage: null when the family tokenises its prompt in the engine or reads none;
  // FAILED_PRECONDITION naming the file when the stage's tokenizer is missing or unreadable.
  static absl::StatusOr<std::unique_ptr<PromptEncoder>> ForFamily(const std::string& dir,
                                                                  const engine::ModelSet& models);

  // Sets the field of `condition` the family's first stage reads. INVALID_ARGUMENT naming
  // "prompt" for text the tokenizer refuses or that does not fit the stage.
  virtual absl::Status Encode(std::string_view prompt, engine::Condition& condition) const = 0;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_PROMPT_ENCODER_H_
