// A text prompt -> what the first stage of a family's condition pipeline reads, for families
// whose prompt is tokenised outside the engine (the engine depends on LibTorch only). Each kind
// of encoder is its own file and one row of the table in prompt_encoder.cc, which picks the
// kind from what the family's models read (the pipeline's first input, or the target's
// condition when there is no pipeline), never from a family's name:
//   - tar_prompt_encoder: a language-model stage reading prompt ids (Tar's MLLM);
//   - t5_prompt_encoder: a caption-encoder stage reading caption ids (LlamaGen t2i's FLAN-T5);
//   - janus_prompt_encoder: a target without pipeline reading prompt ids (Janus-Pro).
#ifndef MULO_TEXT_PROMPT_ENCODER_H_
#define MULO_TEXT_PROMPT_ENCODER_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/model_set.h"

namespace mulo::text {

class PromptEncoder {
 public:
  virtual ~PromptEncoder() = default;

  // The encoder of the family at `dir` (loaded as `models`): null when the family tokenises its
  // prompt in the engine or reads none; FAILED_PRECONDITION naming the file when the
  // encoder's tokenizer is missing or unreadable.
  static absl::StatusOr<std::unique_ptr<PromptEncoder>> ForFamily(const std::string& dir,
                                                                  const engine::ModelSet& models);

  // Sets the field of `condition` the family's first stage reads. INVALID_ARGUMENT naming
  // "prompt" for text the tokenizer refuses or that does not fit the stage.
  virtual absl::Status Encode(std::string_view prompt, engine::Condition& condition) const = 0;
};

// <dir>/<the directory family.json names for components.`key`>; FAILED_PRECONDITION naming
// the file and key when it names none.
absl::StatusOr<std::string> FamilyComponentDir(const std::string& dir, const std::string& key);

}  // namespace mulo::text

#endif  // MULO_TEXT_PROMPT_ENCODER_H_
