#include "engine/decode/zipar_drafter.h"

#include <algorithm>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/zipar.h"

namespace mulo::engine {

bool ZipArDrafter::Agrees(const std::vector<int64_t>& prefix) const {
  const std::vector<int64_t>& drawn = rows_->tokens();
  return std::equal(prefix.begin(), prefix.end(), drawn.begin());
}

Status ZipArDrafter::Restart(DecodeSession& session, const std::vector<int64_t>& prefix,
                             const ZipArGraphs* graphs) {
  MULO_RETURN_IF_ERROR(drafter_->Truncate(0));
  if (!prefix.empty()) {
    MULO_RETURN_IF_ERROR(
        drafter_->Feed(prefix, 0, static_cast<int64_t>(prefix.size())).status());
  }
  rows_ = std::make_unique<ZipArRows>(grid_, window_, prefix);
  in_graph_tokens_ = graphs != nullptr;
  const int64_t next = static_cast<int64_t>(prefix.size());
  if (next >= grid_ * grid_) return OkStatus();
  if (graphs == nullptr) {
    rows_->Set(next, session.Draw(drafter_->next_logits(), RngStream::kDrafter, sampling_));
    return OkStatus();
  }
  // The same draw left on the device, where the graphs' forwards find it.
  MULO_ASSIGN_OR_RETURN(
      const torch::Tensor token,
      session.DrawOnDevice(drafter_->next_logits(),
                           session.DrawNumbers(RngStream::kDrafter, 1, &sampling_), sampling_));
  MULO_RETURN_IF_ERROR(graphs->SetToken(drafter_->cache(), next, token));
  rows_->Set(next, -1);
  return OkStatus();
}

StatusOr<bool> ZipArDrafter::RunChain(DecodeSession& session, const ZipArGraphs& graphs,
                                      int64_t rows_end) {
  ZipArRows plan = *rows_;
  ZipArGraphs::Chain chain;
  int64_t draws = 0, placeholders = 0;
  while (!plan.RowsDone()[rows_end - 1] &&
         static_cast<int64_t>(chain.forwards.size()) < graphs.chain_forwards()) {
    const ZipArRows::Forward forward = plan.Next(drafter_->condition_rows(), /*with_mask=*/false);
    chain.forwards.push_back(PlannedCall(plan, forward, /*read=*/false));
    chain.forwards.back().sampling = sampling_;
    draws += static_cast<int64_t>(chain.forwards.back().draws.size());
    placeholders = forward.placeholders;
    PlannedAsDrawnOnDevice(plan, forward);
  }
  if (!drafter_->CanStepZipArChain(graphs, chain)) return false;
  // The numbers the forwards would take one forward at a time, taken at once.
  if (draws > 0) chain.uniforms = session.DrawNumbers(RngStream::kDrafter, draws, &sampling_);
  MULO_RETURN_IF_ERROR(drafter_->StepZipArChain(graphs, std::move(chain)).status());
  MULO_RETURN_IF_ERROR(drafter_->cache().Truncate(drafter_->cache().length() - placeholders));
  *rows_ = std::move(plan);
  return true;
}

StatusOr<torch::Tensor> ZipArDrafter::DraftThrough(DecodeSession& session,
                                                   const std::vector<int64_t>& prefix,
                                                   int64_t rows_end) {
  // The drafter pool's graphs, where the drafter's cache is a view of that pool (a request
  // the pool could not seat decodes eagerly).
  const KvReservation* kv = session.reservation();
  const ZipArGraphs* graphs =
      kv != nullptr ? kv->ZipArGraphsOf(*session.models().drafter) : nullptr;
  if (graphs != nullptr && drafter_->cache().pool() != &graphs->pool()) graphs = nullptr;
  if (rows_ == nullptr || !Agrees(prefix)) MULO_RETURN_IF_ERROR(Restart(session, prefix, graphs));
  // Stop as soon as the rows are complete: the forward that would feed their last token
  // waits for the next step, which may bring a different prefix.
  while (!rows_->RowsDone()[rows_end - 1]) {
    MULO_RETURN_IF_ERROR(session.CheckCancelled());
    if (graphs != nullptr && !rows_->narrowed()) {
      MULO_ASSIGN_OR_RETURN(const bool ran, RunChain(session, *graphs, rows_end));
      if (ran) continue;
    }
    in_graph_tokens_ = false;  // the forward may run eagerly, its draws then on the host
    MULO_RETURN_IF_ERROR(StepRows(session, *drafter_, *rows_, graphs, RngStream::kDrafter,
                                  sampling_, /*read=*/false));
  }
  // The new rows: where every draw since the restart was the graphs', the graphs' tokens
  // (a view: the step reads it before this slot's next replay); else the ids known here, the
  // others from the graphs' tokens.
  const int64_t from = static_cast<int64_t>(prefix.size()), to = rows_end * grid_;
  if (graphs != nullptr && in_graph_tokens_) {
    return graphs->TokensAt(drafter_->cache(), from, to - from);
  }
  const std::vector<int64_t> known(rows_->tokens().begin() + from, rows_->tokens().begin() + to);
  const torch::Tensor ids = Upload(torch::tensor(known, torch::kInt64), session.device());
  if (graphs == nullptr ||
      std::all_of(known.begin(), known.end(), [](int64_t id) { return id >= 0; })) {
    return ids;
  }
  return torch::where(ids.ge(0), ids, graphs->Tokens(drafter_->cache()).narrow(0, from, to - from));
}

void ZipArDrafter::Resolve(int64_t from, const std::vector<int64_t>& ids) {
  if (rows_ == nullptr) return;
  for (size_t i = 0; i < ids.size(); ++i) rows_->Resolve(from + static_cast<int64_t>(i), ids[i]);
}

}  // namespace mulo::engine
