// The conditioners a family can hold (conditioner.h), each over its model: the bundled text
// encoder, FLAN-T5 for LlamaGen t2i, Tar's MLLM (a family of its own, decoded by the request's
// StageDecoder) and TA-Tok's de-quantiser. LoadModelSet builds them from family.json.
#ifndef MULO_ENGINE_MODEL_CONDITION_STAGES_H_
#define MULO_ENGINE_MODEL_CONDITION_STAGES_H_

#include <memory>
#include <vector>

#include "engine/model/conditioner.h"
#include "engine/model/t5_encoder.h"
#include "engine/model/ta_tok_dequantizer.h"
#include "engine/model/text_conditioner.h"

namespace mulo::engine {

// prompt -> features [max_tokens, dim].
std::shared_ptr<const Conditioner> TextEncoderStage(std::shared_ptr<const TextConditioner> model);

// caption_ids (1..rows FLAN-T5 ids, the end token included, unpadded) -> features [rows,
// d_model] with upstream's left padding and caption_length (caption_condition.h).
std::shared_ptr<const Conditioner> T5CaptionStage(std::shared_ptr<const T5Encoder> encoder,
                                                  int64_t rows);

// prompt_ids -> condition_tokens: the MLLM family `stage` decoded by the request.
std::shared_ptr<const Conditioner> MllmStage(std::shared_ptr<const ModelSet> stage);

// condition_tokens (exactly `rows`, the target's condition rows) -> features [rows, hidden].
std::shared_ptr<const Conditioner> TaTokStage(std::shared_ptr<const TaTokDequantizer> model,
                                              int64_t rows);

// What TaTokStage accepts: `rows` ids, each one the de-quantiser takes. INVALID_ARGUMENT naming
// "condition_tokens" otherwise (also the server's early check, CheckConditionTokens).
Status CheckTaTokIds(const TaTokDequantizer& model, int64_t rows,
                     const std::vector<int64_t>& ids);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CONDITION_STAGES_H_
