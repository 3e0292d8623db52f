#include "engine/decode/zipar_drafter.h"

#include <algorithm>
#include <utility>

#include "engine/decode/kv_pools.h"
#include "engine/decode/zipar.h"

namespace mulo::engine {

bool ZipArDrafter::Agrees(const std::vector<int64_t>& prefix) const {
  const std::vector<int64_t>& drawn = rows_->tokens();
  return std::equal(prefix.begin(), prefix.end(), drawn.begin());
}

Status ZipArDrafter::Restart(DecodeSession& session, const std::vector<int64_t>& prefix) {
  MULO_RETURN_IF_ERROR(drafter_->Truncate(0));
  if (!prefix.empty()) {
    MULO_RETURN_IF_ERROR(
        drafter_->Feed(prefix, 0, static_cast<int64_t>(prefix.size())).status());
  }
  rows_ = std::make_unique<ZipArRows>(grid_, window_, prefix);
  const int64_t next = static_cast<int64_t>(prefix.size());
  if (next < grid_ * grid_) {
    rows_->Set(next, session.Draw(drafter_->next_logits(), RngStream::kDrafter, sampling_));
  }
  return OkStatus();
}

StatusOr<std::vector<int64_t>> ZipArDrafter::DraftThrough(DecodeSession& session,
                                                          const std::vector<int64_t>& prefix,
                                                          int64_t rows_end) {
  if (rows_ == nullptr || !Agrees(prefix)) MULO_RETURN_IF_ERROR(Restart(session, prefix));
  // Stop as soon as the rows are complete: the forward that would feed their last token
  // waits for the next step, which may bring a different prefix.
  const KvReservation* kv = session.reservation();
  const ZipArGraphs* graphs =
      kv != nullptr ? kv->ZipArGraphsOf(*session.models().drafter) : nullptr;
  while (!rows_->RowsDone()[rows_end - 1]) {
    MULO_RETURN_IF_ERROR(session.CheckCancelled());
    MULO_RETURN_IF_ERROR(
        StepRows(session, *drafter_, *rows_, graphs, RngStream::kDrafter, sampling_));
  }
  return std::vector<int64_t>(rows_->tokens().begin(), rows_->tokens().begin() + rows_end * grid_);
}

}  // namespace mulo::engine
