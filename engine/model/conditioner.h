// One stage of a family's condition pipeline. Every conditioner (the bundled family's text
// encoder, FLAN-T5 for LlamaGen t2i, Tar's MLLM, TA-Tok's de-quantiser) reads one form of a
// request's condition and writes the next, and a family lists its stages in order
// (family.json "pipeline", or the order its components imply; model_set.h):
//   Tar:          prompt_ids -> mllm -> condition_tokens -> ta_tok -> features -> AR-DTok -> VQ
//   LlamaGen t2i: caption_ids -> t5 -> features (+ caption_length) -> GPT -> VQ
//   synth:        prompt -> conditioner -> features -> target -> VQ
// A request enters at the stage that reads what it carries (TA-Tok ids skip Tar's MLLM) and
// runs every later one (RunConditionPipeline in engine/decode/generate.h).
#ifndef MULO_ENGINE_MODEL_CONDITIONER_H_
#define MULO_ENGINE_MODEL_CONDITIONER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/condition.h"

namespace mulo::engine {

struct ModelSet;

enum class ConditionForm {
  kPrompt,      // Condition::prompt: text the engine tokenises itself (the bundled family)
  kPromptIds,   // Condition::prompt_ids: a language model's text ids (Tar's MLLM)
  kCaptionIds,  // Condition::caption_ids: FLAN-T5 ids (LlamaGen t2i)
  kTaTokIds,    // Condition::ta_tok_ids: Tar's image-token ids
  kFeatures,    // Condition::features: what a clip_cond / caption target reads
  kClassLabel,  // Condition::class_label (LlamaGen c2i; no stage)
};

// The request field that carries each form, which errors name: prompt, prompt_ids,
// caption_ids, condition_tokens, condition, class_label.
const char* ConditionFormField(ConditionForm form);

// The form a condition carries: the first of prompt, prompt_ids, caption_ids, ta_tok_ids, a
// class label; else features.
ConditionForm FormOf(const Condition& condition);

// Runs a stage that is itself a token model decoded by a method (Tar's MLLM), for the request
// under way: its method, seed, cancellation and counters are the request's, which the engine's
// decode layer knows and the model layer does not.
class StageDecoder {
 public:
  virtual ~StageDecoder() = default;
  // The stage family's image-token ids for the prompt's text ids.
  virtual StatusOr<std::vector<int64_t>> Decode(const ModelSet& stage,
                                                const std::vector<int64_t>& prompt_ids) = 0;
};

class Conditioner {
 public:
  virtual ~Conditioner() = default;
  // The component's key in family.json (conditioner, t5, mllm, ta_tok).
  virtual std::string name() const = 0;
  virtual ConditionForm input() const = 0;
  virtual ConditionForm output() const = 0;
  // `in` carries input(); the result carries output() (every other field kept).
  // INVALID_ARGUMENT naming the input's field when it does not fit.
  virtual StatusOr<Condition> Run(const Condition& in, StageDecoder& decoder) const = 0;

  // A stage that reads text (prompt, prompt ids, caption ids), timed as the text stage; the
  // others are timed with the prefill.
  bool reads_text() const {
    const ConditionForm in = input();
    return in == ConditionForm::kPrompt || in == ConditionForm::kPromptIds ||
           in == ConditionForm::kCaptionIds;
  }
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CONDITIONER_H_
