// Plain autoregressive decoding: one target forward per token through the KV cache, CFG as
// a batch of two streams. The baseline every speedup is measured against.
#ifndef MULO_ENGINE_DECODE_AR_H_
#define MULO_ENGINE_DECODE_AR_H_

#include "engine/decode/decoding_method.h"

namespace mulo::engine {

class ArDecoder : public DecodingMethod {
 public:
  std::string name() const override { return "ar"; }
  StatusOr<DecodeResult> Decode(const DecodeRequest& request, const ModelSet& models,
                                ProgressSink& progress, const CancelToken& cancel) const override;
};

// Logits of the one guided stream: CFG-mixed when the batch holds [cond, uncond], else row 0.
// logits: [batch, ..., vocab].
torch::Tensor GuidedLogits(const torch::Tensor& logits, double cfg_scale);

// CFG runs two streams unless the scale is exactly 1, where the mix equals the condition.
inline int64_t CfgBatch(const SamplingParams& params) { return params.cfg_scale == 1.0 ? 1 : 2; }

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_AR_H_
