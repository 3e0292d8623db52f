#include "engine/sampling/pooled_threshold_verifier.h"

#include <algorithm>

#include "engine/core/torch_guard.h"

namespace mulo::engine {

StatusOr<Verdict> PooledThresholdVerifier::Verify(const VerifyInput& input,
                                                  const VerifierRngs& /*rngs*/) const {
  const int64_t length = input.drafts.size();
  if (input.p.size(0) < length) {
    return InvalidArgumentError("PooledThresholdVerifier: needs p at every draft");
  }
  return GuardTorch("PooledThresholdVerifier", [&]() -> StatusOr<Verdict> {
    auto tokens = torch::tensor(input.drafts.tokens, torch::kInt64);
    const int64_t k = std::min(k_, neighbors_.max_neighbors() + 1);
    auto pooled = PooledProbability(input.p.narrow(0, 0, length), tokens, neighbors_, k, delta_)
                      .to(torch::kCPU);
    Verdict verdict;
    for (int64_t i = 0; i < length; ++i) {
      // NaN never passes.
      (pooled[i].item<float>() >= tau_ ? verdict.accepted : verdict.rejected).push_back(i);
    }
    return verdict;
  });
}

}  // namespace mulo::engine
