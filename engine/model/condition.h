// What an image is conditioned on, in the form the transformer's condition mode expects.
#ifndef MULO_ENGINE_MODEL_CONDITION_H_
#define MULO_ENGINE_MODEL_CONDITION_H_

#include <torch/torch.h>

#include <cstdint>

namespace mulo::engine {

struct Condition {
  // clip_cond (Tar) and caption (LlamaGen t2i): float features [cls_token_num, cond_dim].
  torch::Tensor features;
  // class_label (LlamaGen c2i): a class id in [0, num_classes).
  int64_t class_label = -1;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CONDITION_H_
