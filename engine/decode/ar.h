// Plain autoregressive decoding: one target forward per token through the KV cache, CFG as a
// batch of two streams. The baseline every speedup is measured against.
#ifndef MULO_ENGINE_DECODE_AR_H_
#define MULO_ENGINE_DECODE_AR_H_

#include "engine/decode/session.h"

namespace mulo::engine {

class ArDecoder : public SteppedMethod {
 public:
  std::string name() const override { return "ar"; }
  Status Validate(const ModelSet& models) const override;

 protected:
  StatusOr<std::unique_ptr<State>> Begin(DecodeSession& session) const override;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_AR_H_
