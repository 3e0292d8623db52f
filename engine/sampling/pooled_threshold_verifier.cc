#include "engine/sampling/pooled_threshold_verifier.h"

#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"

namespace mulo::engine {

StatusOr<Verdict> PooledThresholdVerifier::Verify(const VerifyInput& input,
                                                  const VerifierRngs& rngs) const {
  const int64_t length = input.drafts.size();
  if (input.p.size(0) < length) {
    return InvalidArgumentError("PooledThresholdVerifier: needs p at every draft");
  }
  return GuardTorch("PooledThresholdVerifier", [&]() -> StatusOr<Verdict> {
    // Both rows in one read: [2, length], the pooled mass then the own probability.
    MULO_ASSIGN_OR_RETURN(
        torch::Tensor both,
        HostReadWith(rngs.reader,
                     PooledAndOwn(input.p, torch::tensor(input.drafts.tokens, torch::kInt64)),
                     torch::kFloat32));
    return Judge(both);
  });
}

torch::Tensor PooledThresholdVerifier::PooledAndOwn(const torch::Tensor& p,
                                                    const torch::Tensor& tokens) const {
  const PooledProbabilities probabilities =
      Pool(p.narrow(0, 0, tokens.size(0)), tokens, neighbors_, pooling_);
  return torch::stack({probabilities.pooled, probabilities.own});
}

Verdict PooledThresholdVerifier::Judge(const torch::Tensor& pooled_and_own) const {
  const torch::Tensor both = pooled_and_own.to(torch::kFloat32).to(torch::kFloat64).contiguous();
  const double* const pooled = both.data_ptr<double>();
  const int64_t length = both.size(1);
  return Judge(std::vector<double>(pooled, pooled + length),
               std::vector<double>(pooled + length, pooled + 2 * length));
}

Verdict PooledThresholdVerifier::Judge(const std::vector<double>& pooled,
                                       const std::vector<double>& own) const {
  Verdict verdict;
  for (size_t i = 0; i < pooled.size(); ++i) {
    // NaN never passes.
    const bool keep = pooled[i] >= tau_;
    (keep ? verdict.accepted : verdict.rejected).push_back(static_cast<int64_t>(i));
    if (keep && !(own[i] >= tau_)) verdict.relaxed.push_back(static_cast<int64_t>(i));
  }
  return verdict;
}

torch::Tensor PooledThresholdVerifier::Kept(const torch::Tensor& pooled_and_own) const {
  // Judge compares the float32 mass with the double tau; NaN is never kept either way.
  return pooled_and_own.select(0, 0).to(torch::kFloat32).to(torch::kFloat64) >= tau_;
}

}  // namespace mulo::engine
