// Where a verifier's chain judgements (chain_rejection.h) run. A request verifying alone judges
// its chain at once; a request of the engine loop hands it to the loop (a ChainJudge), which
// judges every waiting request's chain as one batch and reads all their decisions with one
// host read, so a GPU step of many requests waits on the device once, not once per request.
#ifndef MULO_ENGINE_SAMPLING_CHAIN_JUDGE_H_
#define MULO_ENGINE_SAMPLING_CHAIN_JUDGE_H_

#include <cstdint>
#include <vector>

#include "engine/core/status.h"
#include "engine/sampling/chain_rejection.h"

namespace mulo::engine {

// A call's decision on the host (JudgeChains' row).
struct ChainDecision {
  int64_t kept = 0;         // leading drafts kept
  int64_t next_token = -1;  // replacement or bonus; -1 = none
  // Pooled rules: the kept drafts x_i's own masses would have rejected (their indices i).
  std::vector<int64_t> relaxed;
  int64_t neighbors = 0;    // pooled rules: neighbours pooled for the judged drafts
};

// Each call's decision, equal to its decision alone: calls of one vocabulary and device are
// judged as one batch, and each batch's decisions come back in one host read.
std::vector<ChainDecision> JudgeChainsTogether(const std::vector<ChainCall>& calls);

class ChainJudge {
 public:
  virtual ~ChainJudge() = default;
  // The call's decision, JudgeChainsTogether({call})[0], or INTERNAL when the rule failed.
  virtual StatusOr<ChainDecision> Judge(const ChainCall& call) = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_CHAIN_JUDGE_H_
