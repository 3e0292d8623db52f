#include "engine/decode/chain_proposer.h"

#include "engine/core/host_read.h"
#include "engine/sampling/sampler.h"

namespace mulo::engine {

StatusOr<DraftBatch> ChainProposer::Propose(DecodeSession& session, int64_t count) {
  std::vector<int64_t> seq = session.committed();
  const int64_t n = static_cast<int64_t>(seq.size());
  MULO_RETURN_IF_ERROR(
      draft_->Feed(seq, static_cast<int64_t>(draft_->fed().size()), n).status());
  DraftBatch drafts;
  std::vector<torch::Tensor> q;
  for (int64_t j = 0; j < count; ++j) {
    q.push_back(session.Probabilities(draft_->next_logits()));
    const int64_t x = session.greedy()
                          ? ItemOf<int64_t>(q.back().argmax())
                          : SampleFromProbabilities(q.back(), session.rng(RngStream::kDrafter));
    drafts.tokens.push_back(x);
    seq.push_back(x);
    if (j + 1 < count) MULO_RETURN_IF_ERROR(draft_->Feed(seq, n + j, n + j + 1).status());
  }
  drafts.parents = DraftBatch::ChainParents(count);
  drafts.q = torch::stack(q);
  return drafts;
}

}  // namespace mulo::engine
