#include "engine/decode/chain_proposer.h"

#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

StatusOr<DraftBatch> ChainProposer::Propose(DecodeSession& session, int64_t count) {
  std::vector<int64_t> seq = session.committed();
  const int64_t n = static_cast<int64_t>(seq.size());
  MULO_RETURN_IF_ERROR(
      draft_->Feed(seq, static_cast<int64_t>(draft_->fed().size()), n).status());
  // Each draft is drawn where q is and fed back from there; the host reads all of them once,
  // at the end. Draft j takes the drafter stream's next number, as a draw on the host would.
  std::vector<torch::Tensor> q, drawn;
  for (int64_t j = 0; j < count; ++j) {
    q.push_back(session.Probabilities(draft_->next_logits()));
    if (session.greedy()) {
      drawn.push_back(q.back().argmax().view({1}));
    } else {
      drawn.push_back(DrawRows(q.back().unsqueeze(0), session.uniforms(RngStream::kDrafter).Take(1)));
    }
    if (j + 1 < count) MULO_RETURN_IF_ERROR(draft_->FeedDrawn(drawn.back()));
  }
  DraftBatch drafts;
  if (count > 0) {
    MULO_ASSIGN_OR_RETURN(drafts.tokens, session.ReadIds(torch::cat(drawn)));
    draft_->ResolveDrawn(n, drafts.tokens);
  }
  drafts.parents = DraftBatch::ChainParents(count);
  drafts.q = count > 0 ? torch::stack(q) : torch::Tensor();
  return drafts;
}

}  // namespace mulo::engine
