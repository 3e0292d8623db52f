// Tar's prompt encoder (components.mllm): Qwen2.5's tokenizer.json with Tar's added tokens,
// which `convert.py hf-causal-lm` copies beside the MLLM's weights, over Tar's t2i chat prompt
// (text/tar_prompt.h) asking for the scale whose code count the MLLM writes -> prompt_ids.
#ifndef MULO_TEXT_TAR_PROMPT_ENCODER_H_
#define MULO_TEXT_TAR_PROMPT_ENCODER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_set.h"
#include "text/prompt_encoder.h"

namespace mulo::text {

absl::StatusOr<std::unique_ptr<PromptEncoder>> MakeTarPromptEncoder(const std::string& dir,
                                                                    const engine::ModelSet& models);

}  // namespace mulo::text

#endif  // MULO_TEXT_TAR_PROMPT_ENCODER_H_
