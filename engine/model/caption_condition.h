// LlamaGen t2i's condition from a caption's FLAN-T5 tokens (text/t5_tokenizer pads them to the
// family's cls_token_num, 120 upstream): the encoder's features, then upstream's left padding
// (sample_t2i.py): the real tokens' rows moved to the end, the padded rows first and zeroed,
// and caption_length the real tokens' count, the form Condition's caption path takes.
#ifndef MULO_ENGINE_MODEL_CAPTION_CONDITION_H_
#define MULO_ENGINE_MODEL_CAPTION_CONDITION_H_

#include <cstdint>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/condition.h"
#include "engine/model/t5_encoder.h"

namespace mulo::engine {

// `ids` and `mask` (1 for the real tokens, a prefix, then 0) of exactly `cls_token_num`
// entries. INVALID_ARGUMENT naming "caption_ids" or "caption_mask" otherwise.
StatusOr<Condition> T5CaptionCondition(const T5Encoder& encoder, const std::vector<int64_t>& ids,
                                       const std::vector<int64_t>& mask, int64_t cls_token_num);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CAPTION_CONDITION_H_
