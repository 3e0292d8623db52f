#include "engine/sampling/pooled_threshold_verifier.h"

#include "engine/core/host_read.h"
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
    PooledProbabilities probabilities =
        Pool(input.p.narrow(0, 0, length), tokens, neighbors_, pooling_);
    // Both rows in one read: [2, length], the pooled mass then the own probability.
    const torch::Tensor both =
        HostRead(torch::stack({probabilities.pooled, probabilities.own}), torch::kFloat32)
            .contiguous();
    auto both_at = both.accessor<float, 2>();
    auto pooled_at = both_at[0];
    auto own_at = both_at[1];
    Verdict verdict;
    for (int64_t i = 0; i < length; ++i) {
      // NaN never passes.
      const bool keep = pooled_at[i] >= tau_;
      (keep ? verdict.accepted : verdict.rejected).push_back(i);
      if (keep && !(own_at[i] >= tau_)) ++verdict.relaxed_accepts;
    }
    return verdict;
  });
}

}  // namespace mulo::engine
