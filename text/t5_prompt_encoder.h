// LlamaGen t2i's prompt encoder (components.t5): the caption cleaned as upstream
// (text/clean_caption.h, twice) and cut into FLAN-T5's sentencepiece pieces (spiece.model,
// which `convert.py hf-t5-encoder` copies), the end token, truncated to the condition's rows
// -> caption_ids.
#ifndef MULO_TEXT_T5_PROMPT_ENCODER_H_
#define MULO_TEXT_T5_PROMPT_ENCODER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_set.h"
#include "text/prompt_encoder.h"

namespace mulo::text {

absl::StatusOr<std::unique_ptr<PromptEncoder>> MakeT5PromptEncoder(const std::string& dir,
                                                                   const engine::ModelSet& models);

}  // namespace mulo::text

#endif  // MULO_TEXT_T5_PROMPT_ENCODER_H_
