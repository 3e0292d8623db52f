#include "engine/decode/mulo_proposer.h"

#include <algorithm>

namespace mulo::engine {

MuloProposer::MuloProposer(ModelStream* drafter, const MuloOptions& options,
                           const ModelSet& models)
    : drafter_(drafter),
      options_(options),
      models_(models),
      grid_(models.target->config().grid_size),
      small_(models.drafter->config().grid_size),
      r_(models.upsampler->config().factor) {}

StatusOr<DraftBatch> MuloProposer::Propose(DecodeSession& session) {
  const std::vector<int64_t>& x = session.committed();
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t committed_rows = n / grid_;  // a multiple of r
  first_row_ = committed_rows / r_;
  rows_ = std::min(options_.draft_rows, small_ - first_row_);

  // (7) y = D_r(x): the drafter's prefix, from the first row not kept as drafted.
  std::vector<int64_t> y = kept_;
  if (static_cast<int64_t>(kept_.size()) < first_row_ * small_) {
    auto timer = session.Time(Phase::kDownsample);
    MULO_ASSIGN_OR_RETURN(std::vector<int64_t> down,
                          models_.downsampler->Apply(x, committed_rows, grid_));
    y.insert(y.end(), down.begin() + kept_.size(), down.end());  // D_r is row-causal
  }
  {
    auto timer = session.Time(Phase::kDraft);
    // The drafter keeps its cache up to the first token D_r changed; re-feeding at least the
    // prefix's last token recomputes the next distribution too.
    const std::vector<int64_t>& fed = drafter_->fed();
    size_t same = 0;
    while (same < y.size() && same < fed.size() && y[same] == fed[same]) ++same;
    if (same < fed.size()) {
      if (same == y.size() && same > 0) --same;
      MULO_RETURN_IF_ERROR(drafter_->Truncate(same));
    }
    if (y.size() > same) MULO_RETURN_IF_ERROR(drafter_->Feed(y, same, y.size()).status());
    // (1) The drafter samples `rows_` whole low-resolution rows.
    const int64_t end = (first_row_ + rows_) * small_;
    for (int64_t j = static_cast<int64_t>(y.size()); j < end; ++j) {
      y.push_back(session.Draw(drafter_->next_logits(), RngStream::kDrafter));
      if (j + 1 < small_ * small_) MULO_RETURN_IF_ERROR(drafter_->Feed(y, j, j + 1).status());
    }
  }
  // (2) U_r: r target rows per drafted row (the prefix rows are its row-causal context).
  auto timer = session.Time(Phase::kUpsample);
  MULO_ASSIGN_OR_RETURN(std::vector<int64_t> up,
                        models_.upsampler->Apply(y, first_row_ + rows_, small_));
  y_ = std::move(y);
  drafts_.assign(up.begin() + n, up.end());
  DraftBatch drafts;
  drafts.tokens = drafts_;
  drafts.parents.assign(drafts_.size(), -1);
  return drafts;
}

void MuloProposer::Committed(const std::vector<int64_t>& committed) {
  if (options_.prefix != DraftPrefix::kKeepDrafted ||
      static_cast<int64_t>(kept_.size()) != first_row_ * small_) {
    return;
  }
  // Extend over the new low-resolution rows while their r target rows are unchanged.
  const int64_t n = first_row_ * r_ * grid_;
  int64_t row = first_row_;
  for (; row < first_row_ + rows_; ++row) {
    const int64_t from = row * r_ * grid_, to = from + r_ * grid_;
    if (!std::equal(committed.begin() + from, committed.begin() + to,
                    drafts_.begin() + (from - n))) {
      break;
    }
  }
  kept_.assign(y_.begin(), y_.begin() + row * small_);
}

}  // namespace mulo::engine
