// What an image is conditioned on, in the form the transformer's condition mode expects.
#ifndef MULO_ENGINE_MODEL_CONDITION_H_
#define MULO_ENGINE_MODEL_CONDITION_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace mulo::engine {

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
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CONDITION_H_
