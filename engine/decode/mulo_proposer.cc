#include "engine/decode/mulo_proposer.h"

#include <algorithm>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"

namespace mulo::engine {

MuloProposer::MuloProposer(ModelStream* drafter, const MuloOptions& options,
                           const SamplingParams& draft_sampling, const ModelSet& models)
    : drafter_(drafter),
      options_(options),
      draft_sampling_(draft_sampling),
      models_(models),
      grid_(models.target->grid_size()),
      small_(models.drafter->grid_size()),
      r_(models.upsampler->config().factor) {
  if (options_.zipar_window > 0) {
    zipar_ = std::make_unique<ZipArDrafter>(drafter_, small_, options_.zipar_window,
                                            draft_sampling_);
  }
}

StatusOr<torch::Tensor> MuloProposer::DraftRows(DecodeSession& session,
                                                const std::vector<int64_t>& y) {
  // The drafter keeps its cache up to the first prefix token that changed; re-feeding at
  // least the prefix's last token recomputes the next distribution too.
  const std::vector<int64_t>& fed = drafter_->fed();
  size_t same = 0;
  while (same < y.size() && same < fed.size() && y[same] == fed[same]) ++same;
  if (same < fed.size()) {
    if (same == y.size() && same > 0) --same;
    MULO_RETURN_IF_ERROR(drafter_->Truncate(same));
  }
  if (y.size() > same) MULO_RETURN_IF_ERROR(drafter_->Feed(y, same, y.size()).status());
  // The drafter samples `rows_` whole low-resolution rows, each token drawn where its logits
  // are and fed back from there; its caller reads them with the step's other values. Token j
  // takes the drafter stream's next number, as a draw on the host would.
  const int64_t start = static_cast<int64_t>(y.size());
  const int64_t end = (first_row_ + rows_) * small_;
  const torch::Tensor numbers =
      end > start ? session.DrawNumbers(RngStream::kDrafter, end - start, &draft_sampling_)
                  : torch::Tensor();
  if (end > start && drafter_->CanFeedRowOnDevice(end - start, draft_sampling_)) {
    // The same draws and feeds in one replay of the drafter pool's row graphs.
    return drafter_->DrawAndFeedRowOnDevice(numbers, draft_sampling_, end - start);
  }
  std::vector<torch::Tensor> drawn;
  for (int64_t j = start; j < end; ++j) {
    MULO_ASSIGN_OR_RETURN(
        torch::Tensor token,
        session.DrawOnDevice(drafter_->next_logits(),
                             numbers.defined() ? numbers.narrow(0, j - start, 1) : numbers,
                             draft_sampling_));
    drawn.push_back(std::move(token));
    if (j + 1 < small_ * small_) MULO_RETURN_IF_ERROR(drafter_->FeedDrawn(drawn.back()));
  }
  if (drawn.empty()) {
    return torch::zeros({0}, torch::TensorOptions().dtype(torch::kInt64).device(session.device()));
  }
  return torch::cat(drawn);
}

void MuloProposer::PlanRows(int64_t committed) {
  first_row_ = committed / grid_ / r_;  // every step commits whole drafted rows
  rows_ = std::min(options_.draft_rows, small_ - first_row_);
}

bool MuloProposer::FitsStepGraphs(const MuloVerifyGraphs& graphs) const {
  return zipar_ == nullptr && graphs.shape().carried == row_tokens() &&
         static_cast<int64_t>(prefix_.size()) == first_row_ * small_ &&
         drafter_->fed() == prefix_ && drafter_->CanDraftMuloRow(graphs, draft_sampling_);
}

MuloVerifyGraphs::DrafterRow MuloProposer::DraftInGraphs(DecodeSession& session) {
  MuloVerifyGraphs::DrafterRow row;
  row.uniforms = session.DrawNumbers(RngStream::kDrafter, row_tokens(), &draft_sampling_);
  row.sampling = draft_sampling_;
  y_ = prefix_;
  drawn_from_ = static_cast<int64_t>(prefix_.size());
  return row;
}

StatusOr<torch::Tensor> MuloProposer::DraftNewRows(DecodeSession& session) {
  PlanRows(static_cast<int64_t>(session.committed().size()));
  // (1) The drafter's next `rows_` rows after its prefix (7, derived in Committed): one token
  // per forward, or as ZipAR's wavefront. Left on the device: they ride through the step's read.
  auto timer = session.Time(Phase::kDraft);
  StatusOr<torch::Tensor> ids = zipar_ != nullptr
                                    ? zipar_->DraftThrough(session, prefix_, first_row_ + rows_)
                                    : DraftRows(session, prefix_);
  y_ = prefix_;
  drawn_from_ = static_cast<int64_t>(y_.size());
  return ids;
}

StatusOr<MuloProposer::Proposal> MuloProposer::Propose(DecodeSession& session) {
  const int64_t n = static_cast<int64_t>(session.committed().size());
  Proposal proposal;
  MULO_ASSIGN_OR_RETURN(proposal.drafter_ids, DraftNewRows(session));
  // (2) U_r: r target rows per drafted row (the prefix rows are its row-causal context), on the
  // drafter's tokens where they were drawn.
  auto timer = session.Time(Phase::kUpsample);
  const torch::Tensor low =
      torch::cat({Upload(torch::tensor(y_, torch::kInt64), proposal.drafter_ids.device()),
                  proposal.drafter_ids});
  MULO_ASSIGN_OR_RETURN(torch::Tensor up,
                        session.ResampleDrawn(*models_.upsampler, low, first_row_ + rows_, small_));
  proposal.length = up.size(0) - n;
  proposal.drafts = up.narrow(0, n, proposal.length);
  return proposal;
}

void MuloProposer::Resolve(const std::vector<int64_t>& drafter_ids,
                           const std::vector<int64_t>& drafts) {
  drafter_->ResolveDrawn(drawn_from_, drafter_ids);
  if (zipar_ != nullptr) zipar_->Resolve(drawn_from_, drafter_ids);
  y_.insert(y_.end(), drafter_ids.begin(), drafter_ids.end());
  drafts_ = drafts;
}

bool MuloProposer::BlockAsDrafted(const std::vector<int64_t>& committed, int64_t row,
                                  int64_t col) const {
  const int64_t n = first_row_ * r_ * grid_;
  for (int64_t dr = 0; dr < r_; ++dr) {
    const int64_t from = (row * r_ + dr) * grid_ + col * r_;
    if (!std::equal(committed.begin() + from, committed.begin() + from + r_,
                    drafts_.begin() + (from - n))) {
      return false;
    }
  }
  return true;
}

bool MuloProposer::RowAsDrafted(const std::vector<int64_t>& committed, int64_t row) const {
  for (int64_t col = 0; col < small_; ++col) {
    if (!BlockAsDrafted(committed, row, col)) return false;
  }
  return true;
}

Status MuloProposer::Committed(DecodeSession& session, const std::vector<int64_t>& committed) {
  const int64_t rows_end = first_row_ + rows_;
  std::vector<int64_t> down;  // D_r of the committed rows, computed only when a token needs it
  Stats& stats = session.stats();
  for (int64_t row = first_row_; row < rows_end; ++row) {
    const bool row_as_drafted =
        options_.prefix == DraftPrefix::kKeepDrafted && !diverged_ && RowAsDrafted(committed, row);
    if (options_.prefix == DraftPrefix::kKeepDrafted && !row_as_drafted) diverged_ = true;
    for (int64_t col = 0; col < small_; ++col) {
      bool own = false;
      switch (options_.prefix) {
        case DraftPrefix::kDownsampled: own = false; break;
        case DraftPrefix::kKeepDrafted: own = row_as_drafted; break;
        case DraftPrefix::kPatch: own = BlockAsDrafted(committed, row, col); break;
        case DraftPrefix::kOwn: own = true; break;
      }
      const int64_t i = row * small_ + col;
      if (own) {
        prefix_.push_back(y_[i]);
        ++stats.prefix_own_tokens;
        continue;
      }
      if (down.empty()) {
        auto timer = session.Time(Phase::kDownsample);
        // D_r is row-causal: the committed rows so far determine these low-resolution rows.
        MULO_ASSIGN_OR_RETURN(
            down, session.Resample(*models_.downsampler, committed, rows_end * r_, grid_));
      }
      prefix_.push_back(down[i]);
      ++stats.prefix_downsampled_tokens;
    }
  }
  return OkStatus();
}

}  // namespace mulo::engine
