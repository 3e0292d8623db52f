// What an image is conditioned on, in the form a token model's condition mode expects.
#ifndef MULO_ENGINE_MODEL_CONDITION_H_
#define MULO_ENGINE_MODEL_CONDITION_H_

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

enum class ConditionMode {
  kClipCond,    // Tar: float features [n, cond_dim] through `clip_proj`; null = zeros
  kClassLabel,  // LlamaGen c2i: a label through `cls_embedding.embedding_table`; null = K
  kCaption,     // LlamaGen t2i: features through `cls_embedding.cap_proj` MLP; null =
                // `cls_embedding.uncond_embedding`
  kPromptIds,   // a language model reading the prompt's own text token ids (Tar's MLLM)
};

// What a token model is conditioned on (TokenModel::condition_shape).
struct ConditionShape {
  ConditionMode mode = ConditionMode::kClipCond;
  int64_t rows = 0;         // condition positions at most (features: exactly, captions: up to)
  int64_t width = 0;        // feature width (kClipCond, kCaption)
  int64_t num_classes = 0;  // kClassLabel
};

struct Condition {
  // clip_cond (Tar) and caption (LlamaGen t2i): float features [cls_token_num, cond_dim].
  torch::Tensor features;
  // class_label (LlamaGen c2i): a class id in [0, num_classes).
  int64_t class_label = -1;
  // caption (LlamaGen t2i): how many of the cls_token_num rows hold the prompt's real T5
  // tokens, left-padded as upstream's sample_t2i.py does (the last caption_length rows); 0
  // means all. Upstream masks the padded positions out of every row's attention, so the
  // engine runs only the real ones (Transformer::EmbedCondition).
  int64_t caption_length = 0;
  // Tar: TA-Tok image-token ids (a square count, cls_token_num of them) that the family's
  // de-quantiser turns into `features` before decoding (ResolveCondition in generate.h).
  std::vector<int64_t> ta_tok_ids;
  // kPromptIds: the prompt's text token ids (chat template applied), 1..rows of them.
  std::vector<int64_t> prompt_ids;
  // The stages before the target (conditioner.h) read these: the prompt's text, for a family
  // that tokenises it in the engine (the bundled one's text encoder), and FLAN-T5 ids (LlamaGen
  // t2i: the cleaned caption's tokens and the end token, unpadded), which its T5 stage turns
  // into `features` and `caption_length`.
  std::string prompt;
  std::vector<int64_t> caption_ids;
};

// A caption_length (Condition::caption_length) the model can take: 0, or in [1, rows] on a
// caption model. INVALID_ARGUMENT naming "caption_length" otherwise.
Status CheckCaptionLength(const ConditionShape& shape, int64_t caption_length);
// A class id a class_label (LlamaGen c2i) model can take: [0, num_classes). INVALID_ARGUMENT
// naming "class_label" otherwise, and on models of other condition modes.
Status CheckClassLabel(const ConditionShape& shape, int64_t class_label);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CONDITION_H_
