#include "engine/sampling/exact_verifier.h"

#include <algorithm>
#include <string>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/sampling/chain_judge.h"
#include "engine/sampling/chain_rejection.h"
#include "engine/sampling/philox.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative_acceptance.h"

namespace mulo::engine {

ExactVerifier::Judgement ExactVerifier::Judge(const torch::Tensor& p, const torch::Tensor& q,
                                              int64_t x, Rng& accept) const {
  const double p_x = p[x].item<double>(), q_x = q[x].item<double>();
  Judgement judgement;
  judgement.keep = rule_ ? rule_(p_x, q_x, accept) : Keeps(p_x, q_x, accept.Uniform());
  return judgement;
}

namespace {

Status CheckChain(const VerifyInput& input) {
  const DraftBatch& drafts = input.drafts;
  const int64_t length = drafts.size();
  for (int64_t i = 0; i < length; ++i) {
    if (drafts.parents[i] != i - 1) {
      return InvalidArgumentError("ExactVerifier: drafts must form a chain");
    }
  }
  if (!drafts.q.defined() || drafts.q.size(0) != length || input.p.size(0) < length) {
    return InvalidArgumentError("ExactVerifier: needs q for every draft and p at every draft");
  }
  return OkStatus();
}

}  // namespace

ChainNumbers PeekChainNumbers(const VerifierRngs& rngs, int64_t length,
                              const torch::Device& device) {
  auto numbers = [&](const Rng& rng, UniformCache* cache, int64_t count) {
    return cache != nullptr ? cache->Peek(count) : StreamUniforms(rng, count, device);
  };
  return {numbers(*rngs.accept, rngs.accept_numbers, length),
          numbers(*rngs.draw, rngs.draw_numbers, 1)};
}

void SkipChainNumbers(const VerifierRngs& rngs, int64_t length, int64_t kept, bool bonus_drawn) {
  rngs.accept->Skip(static_cast<uint64_t>(std::min(kept + 1, length)));
  if (kept < length || bonus_drawn) rngs.draw->Skip(1);
}

StatusOr<Verdict> ExactVerifier::Verify(const VerifyInput& input,
                                        const VerifierRngs& rngs) const {
  if (!JudgesOnDevice()) return VerifyOnHost(input, rngs);
  MULO_RETURN_IF_ERROR(CheckChain(input));
  return GuardTorch("ExactVerifier", [&]() -> StatusOr<Verdict> {
    const DraftBatch& drafts = input.drafts;
    const int64_t length = drafts.size();
    const torch::Device device = input.p.device();
    const torch::Tensor tokens = Upload(torch::tensor(drafts.tokens, torch::kInt64), device);
    const ChainNumbers numbers = PeekChainNumbers(rngs, length, device);
    ChainCall call{input.p, drafts.q, tokens, numbers.accept, numbers.draw, input.greedy};
    if (length > 0) {
      call.pooled = PooledMassesOnDevice(input.p.narrow(0, 0, length), drafts.q, tokens);
    }
    ChainDecision decision;
    if (rngs.judge != nullptr) {
      MULO_ASSIGN_OR_RETURN(decision, rngs.judge->Judge(call));
    } else {
      decision = JudgeChainsTogether({call})[0];
    }
    const int64_t kept = decision.kept;
    const int64_t judged = std::min(kept + 1, length);  // the kept drafts and the first rejected
    Verdict verdict;
    for (int64_t i = 0; i < kept; ++i) verdict.accepted.push_back(i);
    verdict.next_token = decision.next_token;
    if (call.pooled) {  // as the host loop counts them: every judged draft pools
      verdict.relaxed = decision.relaxed;
      verdict.pooled_drafts = judged;
      verdict.pooled_neighbors = decision.neighbors;
    }
    SkipChainNumbers(rngs, length, kept, input.p.size(0) > length && !input.greedy);
    return verdict;
  });
}

StatusOr<Verdict> ExactVerifier::VerifyOnHost(const VerifyInput& input,
                                              const VerifierRngs& rngs) const {
  MULO_RETURN_IF_ERROR(CheckChain(input));
  const DraftBatch& drafts = input.drafts;
  const int64_t length = drafts.size();
  return GuardTorch("ExactVerifier", [&]() -> StatusOr<Verdict> {
    // Everything the rule reads, on the host in one transfer per tensor.
    const auto p = HostRead(input.p, torch::kFloat32).contiguous();
    const auto q = HostRead(drafts.q, torch::kFloat32).contiguous();
    Verdict verdict;
    for (int64_t i = 0; i < length; ++i) {
      const Judgement judgement = Judge(p[i], q[i], drafts.tokens[i], *rngs.accept);
      if (judgement.pooled >= 0) {
        ++verdict.pooled_drafts;
        verdict.pooled_neighbors += judgement.pooled;
      }
      if (!judgement.keep) {
        const torch::Tensor replacement = residual_ ? residual_(input.p[i], drafts.q[i])
                                                    : ResidualDistribution(input.p[i], drafts.q[i]);
        verdict.next_token = SampleFromProbabilities(replacement, *rngs.draw);
        return verdict;
      }
      if (judgement.relaxed) verdict.relaxed.push_back(i);
      verdict.accepted.push_back(i);
    }
    if (input.p.size(0) > length) {  // the bonus position after a fully kept chain
      const auto bonus = input.p[length];
      verdict.next_token = input.greedy ? ItemOf<int64_t>(bonus.argmax())
                                        : SampleFromProbabilities(bonus, *rngs.draw);
    }
    return verdict;
  });
}

}  // namespace mulo::engine
