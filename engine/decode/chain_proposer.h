// The proposer of classic speculative decoding: a small draft model continues the committed
// tokens by `count` tokens, each drawn from its own distribution q (kept for the verifier).
#ifndef MULO_ENGINE_DECODE_CHAIN_PROPOSER_H_
#define MULO_ENGINE_DECODE_CHAIN_PROPOSER_H_

#include "engine/decode/session.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

class ChainProposer {
 public:
  explicit ChainProposer(ModelStream* draft) : draft_(draft) {}

  // Feeds the committed tokens the draft model has not seen, then drafts `count` tokens (each
  // fed back but the last), drawing with the drafter's random stream on the model's device and
  // reading the drafts back once (one host read per proposal).
  StatusOr<DraftBatch> Propose(DecodeSession& session, int64_t count);

  // After verification the draft model keeps the first `n` committed tokens it was fed.
  Status Retain(int64_t n) { return draft_->Truncate(n); }

 private:
  ModelStream* draft_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_CHAIN_PROPOSER_H_
