#include "engine/sampling/guidance.h"

#include "engine/sampling/logits_processor.h"

namespace mulo::engine {

torch::Tensor GuidedLogits(const torch::Tensor& logits, double cfg_scale) {
  return logits.size(0) == 2 ? MixCfg(logits, cfg_scale) : logits.select(0, 0);
}

}  // namespace mulo::engine
