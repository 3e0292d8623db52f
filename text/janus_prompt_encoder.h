// Janus-Pro's prompt encoder (a target reading prompt ids, no pipeline): the tokenizer.json that
// `convert.py janus-family` copies beside the target, over Janus-Pro's t2i prompt
// (text/janus_prompt.h), the begin-of-sentence id (the target's config.json bos_id) first
// -> prompt_ids.
#ifndef MULO_TEXT_JANUS_PROMPT_ENCODER_H_
#define MULO_TEXT_JANUS_PROMPT_ENCODER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_set.h"
#include "text/prompt_encoder.h"

namespace mulo::text {

absl::StatusOr<std::unique_ptr<PromptEncoder>> MakeJanusPromptEncoder(
    const std::string& dir, const engine::ModelSet& models);

}  // namespace mulo::text

#endif  // MULO_TEXT_JANUS_PROMPT_ENCODER_H_
