#include "engine/decode/session.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"
#include "engine/core/op_count.h"
#include "engine/core/torch_guard.h"
#include "engine/decode/kv_pools.h"
#include "engine/sampling/guidance.h"
#include "engine/sampling/logits_processor.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/token_draw.h"

namespace mulo::engine {
namespace {

// One call of a pool's graphs of whole steps (row_graphs.h, verify_graphs.h): in `loop`'s next
// batch of calls of the same graphs when there is a loop, else alone.
template <typename Graphs>
StatusOr<typename Graphs::Output> RunStepGraphs(EngineLoop* loop, const Graphs& graphs,
                                                const typename Graphs::Call& call) {
  if (loop != nullptr) return loop->Run(graphs, call);
  MULO_ASSIGN_OR_RETURN(std::vector<typename Graphs::Output> outputs, graphs.Run({call}));
  return std::move(outputs[0]);
}

// A chain of ZipAR forwards (zipar_graphs.h), the same way.
StatusOr<ZipArGraphs::Output> RunStepGraphs(EngineLoop* loop, const ZipArGraphs& graphs,
                                            const ZipArGraphs::Chain& chain) {
  if (loop != nullptr) return loop->Run(graphs, chain);
  MULO_ASSIGN_OR_RETURN(std::vector<ZipArGraphs::Output> outputs, graphs.RunChains({chain}));
  return std::move(outputs[0]);
}

}  // namespace

ModelStream::ModelStream(const TokenModel& model, KvCache cache, StreamRole role, Stats* stats,
                         ForwardTrace* trace, EngineLoop* loop)
    : model_(model),
      loop_(loop),
      cache_(std::move(cache)),
      role_(role),
      stats_(stats) {
  cache_.set_trace(trace);
}

void ModelStream::CountForward() {
  ++(role_ == StreamRole::kTarget ? stats_->target_forward_passes : stats_->draft_forward_passes);
}

StatusOr<ForwardOutput> ModelStream::RunForward(const torch::Tensor& embeddings,
                                                const torch::Tensor& positions,
                                                const torch::Tensor& mask, LogitsMode mode) {
  if (loop_ != nullptr)
    return loop_->Run(model_, {&cache_, embeddings, positions, mask, mode});
  return model_.Forward(cache_, embeddings, positions, mask, mode);
}

Status ModelStream::Prefill(const torch::Tensor& condition_embeddings) {
  MULO_RETURN_IF_ERROR(model_.CheckPrefill(cache_, condition_embeddings));
  MULO_ASSIGN_OR_RETURN(
      ForwardOutput out,
      RunForward(condition_embeddings, model_.ConditionPositions(condition_embeddings.size(1)),
                 torch::Tensor(), LogitsMode::kLast));
  next_logits_ = out.logits.select(1, 0);
  next_hidden_ = out.hidden.select(1, out.hidden.size(1) - 1);
  condition_rows_ = condition_embeddings.size(1);
  CountForward();
  return OkStatus();
}

StatusOr<ForwardOutput> ModelStream::Append(const torch::Tensor& input, int64_t at, bool drawn,
                                            LogitsMode mode) {
  const int64_t n = input.size(1);
  auto positions = torch::arange(model_.TokenPosition(condition_rows_, at),
                                 model_.TokenPosition(condition_rows_, at + n), torch::kInt64);
  ForwardOutput out;
  if (loop_ != nullptr) {
    // Through the loop even when this request is its only one: a batch of one is a plain
    // Forward, which replays the pool's graphs over pooled caches as a direct call would.
    MULO_ASSIGN_OR_RETURN(torch::Tensor embeddings,
                          drawn ? model_.EmbedDrawnTokens(input) : model_.EmbedTokens(input));
    MULO_ASSIGN_OR_RETURN(out, RunForward(embeddings, positions, torch::Tensor(), mode));
  } else if (drawn) {
    MULO_ASSIGN_OR_RETURN(out, model_.ForwardDrawnTokens(cache_, input, positions, mode));
  } else {
    MULO_ASSIGN_OR_RETURN(out, model_.ForwardTokens(cache_, input, positions, mode));
  }
  next_logits_ = out.logits.select(1, out.logits.size(1) - 1);
  next_hidden_ = out.hidden.select(1, out.hidden.size(1) - 1);
  CountForward();
  return out;
}

StatusOr<torch::Tensor> ModelStream::Feed(const std::vector<int64_t>& tokens, int64_t from,
                                          int64_t to, LogitsMode mode) {
  if (from != static_cast<int64_t>(fed_.size()) || to <= from ||
      to > static_cast<int64_t>(tokens.size())) {
    return FailedPreconditionError("ModelStream::Feed: tokens [" + std::to_string(from) + ", " +
                                   std::to_string(to) + ") do not continue the " +
                                   std::to_string(fed_.size()) + " fed");
  }
  std::vector<int64_t> ids(tokens.begin() + from, tokens.begin() + to);
  auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).expand({cache_.batch(), -1});
  MULO_ASSIGN_OR_RETURN(ForwardOutput out, Append(input.contiguous(), from, /*drawn=*/false, mode));
  fed_.insert(fed_.end(), ids.begin(), ids.end());
  return out.logits;
}

Status ModelStream::FeedDrawn(const torch::Tensor& token, LogitsMode mode) {
  auto input = token.reshape({1, 1}).expand({cache_.batch(), 1}).contiguous();
  MULO_RETURN_IF_ERROR(
      Append(input, static_cast<int64_t>(fed_.size()), /*drawn=*/true, mode).status());
  fed_.push_back(-1);
  return OkStatus();
}

StatusOr<torch::Tensor> ModelStream::FeedWithDrawn(const std::vector<int64_t>& tokens, int64_t from,
                                                   int64_t drawn_from, const torch::Tensor& drawn,
                                                   int64_t to, LogitsMode mode) {
  if (from != static_cast<int64_t>(fed_.size()) || to <= from || drawn_from < from ||
      drawn_from > to || drawn_from > static_cast<int64_t>(tokens.size()) ||
      to - drawn_from > drawn.numel()) {
    return FailedPreconditionError("ModelStream::FeedWithDrawn: tokens [" + std::to_string(from) +
                                   ", " + std::to_string(to) + ") do not continue the " +
                                   std::to_string(fed_.size()) + " fed");
  }
  std::vector<int64_t> host(tokens.begin() + from, tokens.begin() + drawn_from);
  const torch::Tensor tail = drawn.flatten().narrow(0, 0, to - drawn_from);
  const torch::Tensor ids =
      torch::cat({Upload(torch::tensor(host, torch::kInt64), tail.device()), tail});
  auto input = ids.unsqueeze(0).expand({cache_.batch(), -1}).contiguous();
  MULO_ASSIGN_OR_RETURN(ForwardOutput out, Append(input, from, /*drawn=*/true, mode));
  fed_.insert(fed_.end(), host.begin(), host.end());
  fed_.resize(static_cast<size_t>(to), -1);
  return out.logits;
}

void ModelStream::ResolveDrawn(int64_t from, const std::vector<int64_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t at = from + static_cast<int64_t>(i);
    if (at < static_cast<int64_t>(fed_.size())) fed_[at] = ids[i];
  }
}

bool ModelStream::CanFeedRow(int64_t count, const SamplingParams& sampling) const {
  const RowGraphs* rows = RowGraphs::Of(cache_);
  return rows != nullptr && rows->reads_tokens() && rows->tokens() == count &&
         rows->Fits(cache_, sampling);
}

bool ModelStream::CanFeedRowOnDevice(int64_t count, const SamplingParams& sampling) const {
  const RowGraphs* rows = RowGraphs::Of(cache_);
  return rows != nullptr && !rows->shape().drafts && !rows->shape().read &&
         rows->tokens() == count && rows->Fits(cache_, sampling);
}

bool ModelStream::CanDraftChain(int64_t count, int64_t committed,
                                const SamplingParams& sampling) const {
  const RowGraphs* rows = RowGraphs::Of(cache_);
  const int64_t unseen = committed - static_cast<int64_t>(fed_.size());
  return rows != nullptr && rows->shape().drafts && rows->tokens() == count && unseen >= 1 &&
         unseen <= RowGraphs::kMaxPrefix && rows->Fits(cache_, sampling);
}

StatusOr<RowGraphs::Output> ModelStream::DraftChain(const std::vector<int64_t>& committed,
                                                    const torch::Tensor& uniforms,
                                                    const SamplingParams& sampling,
                                                    int64_t count) {
  if (!CanDraftChain(count, static_cast<int64_t>(committed.size()), sampling)) {
    return FailedPreconditionError("ModelStream::DraftChain: no chain graph fits " +
                                   std::to_string(count) + " drafts of this stream");
  }
  const RowGraphs& rows = *RowGraphs::Of(cache_);
  const int64_t at = static_cast<int64_t>(fed_.size()), context = cache_.length();
  RowGraphs::Call call{
      &cache_, torch::Tensor(), {committed.begin() + at, committed.end()}, uniforms, sampling,
      model_.TokenPosition(condition_rows_, at),
      model_.TokenPosition(condition_rows_, std::max<int64_t>(0, model_.num_image_tokens() - 2))};
  MULO_ASSIGN_OR_RETURN(RowGraphs::Output out, RunStepGraphs(loop_, rows, call));
  next_logits_ = torch::Tensor();  // a chain's last logits are never read (Truncate follows)
  next_hidden_ = torch::Tensor();
  fed_.insert(fed_.end(), committed.begin() + at, committed.end());
  fed_.insert(fed_.end(), count - 1, -1);
  // The prefix's forward (its rows padded to kMaxPrefix), then one per fed draft.
  const int64_t prefix = static_cast<int64_t>(committed.size()) - at;
  for (int64_t j = 0; j < count; ++j) {
    CountForward();
    if (cache_.trace() != nullptr) {
      cache_.trace()->push_back({&model_, cache_.batch(), j == 0 ? RowGraphs::kMaxPrefix : 1,
                                 j == 0 ? context : context + prefix + j - 1, /*graph=*/true});
    }
  }
  return out;
}

bool ModelStream::CanVerifyChain(const VerifyGraphs::Shape& shape,
                                 const SamplingParams& sampling) const {
  const VerifyGraphs* verify = VerifyGraphs::Of(cache_, shape);
  return verify != nullptr && verify->Fits(cache_, sampling);
}

StatusOr<VerifyGraphs::Output> ModelStream::VerifyChain(const VerifyGraphs::Shape& shape,
                                                        VerifyGraphs::Call call) {
  const int64_t count = shape.drafts;
  if (!CanVerifyChain(shape, call.sampling)) {
    return FailedPreconditionError("ModelStream::VerifyChain: no verify graph fits " +
                                   std::to_string(count) + " drafts of this stream");
  }
  const VerifyGraphs& verify = *VerifyGraphs::Of(cache_, shape);
  const int64_t at = static_cast<int64_t>(fed_.size()), context = cache_.length();
  call.cache = &cache_;
  call.first_position = model_.TokenPosition(condition_rows_, at);
  call.last_position =
      model_.TokenPosition(condition_rows_, std::max<int64_t>(0, model_.num_image_tokens() - 2));
  MULO_ASSIGN_OR_RETURN(VerifyGraphs::Output out, RunStepGraphs(loop_, verify, call));
  next_logits_ = torch::Tensor();  // the verdict replaces them (Truncate follows)
  next_hidden_ = torch::Tensor();
  fed_.push_back(call.last_token);
  fed_.insert(fed_.end(), out.drafts.begin(), out.drafts.end());
  CountForward();
  if (cache_.trace() != nullptr) {
    cache_.trace()->push_back({&model_, cache_.batch(), count + 1, context, /*graph=*/true});
  }
  return out;
}

bool ModelStream::CanVerifyTree(const TreeVerifyGraphs& graphs, int64_t nodes, int64_t max_depth,
                                const SamplingParams& sampling) const {
  return graphs.Fits(cache_, nodes, max_depth, sampling);
}

StatusOr<TreeVerifyGraphs::Output> ModelStream::VerifyTree(const TreeVerifyGraphs& graphs,
                                                           TreeVerifyGraphs::Call call) {
  // A Jacobi window's tree is the graphs' own shape (its tokens are made in the replay).
  const int64_t nodes = graphs.shape().jacobi_window() ? graphs.shape().nodes
                        : call.tokens.defined()        ? call.tokens.size(0)
                                                       : 0;
  if (!CanVerifyTree(graphs, nodes, graphs.shape().max_depth, call.sampling)) {
    return FailedPreconditionError("ModelStream::VerifyTree: no tree verify graph fits " +
                                   std::to_string(nodes) + " nodes of this stream");
  }
  // A node's position is the root's plus its depth: raster positions must map to consecutive
  // sequence positions (every architecture's TokenPosition is affine).
  const int64_t at = static_cast<int64_t>(fed_.size()), context = cache_.length();
  call.root_position = model_.TokenPosition(condition_rows_, at);
  if (model_.TokenPosition(condition_rows_, at + 1) != call.root_position + 1) {
    return FailedPreconditionError(
        "ModelStream::VerifyTree: the model's raster positions are not consecutive");
  }
  // A window padded past the image's end feeds its pads, and the image's last token (never
  // fed: no token follows it), at the last position a token is fed at; their rows are never
  // kept.
  if (graphs.shape().jacobi_window()) {
    call.jacobi.last_position = model_.TokenPosition(
        condition_rows_, at + call.jacobi.length - (call.jacobi.bonus ? 0 : 1));
  }
  call.cache = &cache_;
  MULO_ASSIGN_OR_RETURN(TreeVerifyGraphs::Output out, RunStepGraphs(loop_, graphs, call));
  next_logits_ = torch::Tensor();  // the verdict replaces them (Keep follows)
  next_hidden_ = torch::Tensor();
  fed_.push_back(call.root_token);
  fed_.insert(fed_.end(), out.host.begin(), out.host.begin() + nodes);
  CountForward();
  if (cache_.trace() != nullptr) {
    cache_.trace()->push_back({&model_, cache_.batch(), nodes + 1, context, /*graph=*/true});
  }
  return out;
}

int64_t ModelStream::MuloTailStart(int64_t committed) const {
  const int64_t fed = static_cast<int64_t>(fed_.size());
  return fed == committed && committed > 0 ? committed - 1 : fed;
}

bool ModelStream::CanVerifyMulo(const MuloVerifyGraphs& graphs,
                                const std::vector<int64_t>& committed,
                                const SamplingParams& sampling) const {
  const int64_t n = static_cast<int64_t>(committed.size());
  if (static_cast<int64_t>(fed_.size()) > n) return false;
  const int64_t start = MuloTailStart(n);
  if (start == n && !next_logits_.defined()) return false;
  return graphs.Fits(cache_, condition_rows_ + start, n - start, sampling);
}

bool ModelStream::CanDraftMuloRow(const MuloVerifyGraphs& graphs,
                                  const SamplingParams& sampling) const {
  return graphs.shape().draft && next_logits_.defined() &&
         std::find(fed_.begin(), fed_.end(), -1) == fed_.end() &&
         graphs.FitsDrafter(cache_, static_cast<int64_t>(fed_.size()), sampling);
}

StatusOr<MuloVerifyGraphs::Output> ModelStream::VerifyMulo(const MuloVerifyGraphs& graphs,
                                                           const std::vector<int64_t>& committed,
                                                           MuloVerifyGraphs::Call call,
                                                           ModelStream* drafter) {
  if (!CanVerifyMulo(graphs, committed, call.sampling)) {
    return FailedPreconditionError("ModelStream::VerifyMulo: no MuLo-SD verify graph fits " +
                                   std::to_string(committed.size()) + " committed tokens");
  }
  if (graphs.shape().draft &&
      (drafter == nullptr || !drafter->CanDraftMuloRow(graphs, call.drafter.sampling))) {
    return FailedPreconditionError(
        "ModelStream::VerifyMulo: the step graphs need a drafter whose next row fits them");
  }
  const int64_t drafter_context = drafter != nullptr ? drafter->cache_.length() : 0;
  if (graphs.shape().draft) {
    MuloVerifyGraphs::DrafterRow& row = call.drafter;
    const TokenModel& model = drafter->model_;
    const int64_t at = static_cast<int64_t>(drafter->fed_.size());
    row.cache = &drafter->cache_;
    row.logits = drafter->next_logits_;
    row.prefix = drafter->fed_;
    row.first_position = model.TokenPosition(drafter->condition_rows_, at);
    row.last_position = model.TokenPosition(
        drafter->condition_rows_, std::max<int64_t>(0, model.num_image_tokens() - 2));
  }
  const int64_t n = static_cast<int64_t>(committed.size());
  const int64_t start = MuloTailStart(n), drafts = graphs.shape().drafts;
  // Rows are fed at consecutive sequence positions (every architecture's TokenPosition is
  // affine) up to the last a token is fed at (the image's last token is never fed: its row,
  // the last draft's at the image's end, and pad rows take that position, and nothing reads
  // them).
  call.first_position = model_.TokenPosition(condition_rows_, start);
  if (model_.TokenPosition(condition_rows_, start + 1) != call.first_position + 1) {
    return FailedPreconditionError(
        "ModelStream::VerifyMulo: the model's raster positions are not consecutive");
  }
  call.last_position =
      model_.TokenPosition(condition_rows_, std::max<int64_t>(0, model_.num_image_tokens() - 2));
  if (start < static_cast<int64_t>(fed_.size())) MULO_RETURN_IF_ERROR(Truncate(start));
  call.cache = &cache_;
  call.tail.assign(committed.begin() + start, committed.end());
  if (call.tail.empty()) call.first_logits = next_logits_;
  const int64_t context = cache_.length(), rows = graphs.RowsOf(n - start);
  MULO_ASSIGN_OR_RETURN(MuloVerifyGraphs::Output out, RunStepGraphs(loop_, graphs, call));
  next_logits_ = torch::Tensor();  // the verdict replaces them (Truncate follows a re-sample)
  next_hidden_ = torch::Tensor();
  fed_.insert(fed_.end(), call.tail.begin(), call.tail.end());
  fed_.insert(fed_.end(), drafts, -1);
  CountForward();
  if (cache_.trace() != nullptr) {
    cache_.trace()->push_back({&model_, cache_.batch(), rows, context, /*graph=*/true});
  }
  if (graphs.shape().draft) {
    // The drafter's row: its forwards count as the forwards they are, replayed with the step.
    const int64_t count = graphs.shape().carried;
    drafter->next_logits_ = out.drafter_logits;
    drafter->next_hidden_ = torch::Tensor();
    drafter->fed_.insert(drafter->fed_.end(), count, -1);
    for (int64_t j = 0; j < count; ++j) {
      drafter->CountForward();
      if (drafter->cache_.trace() != nullptr) {
        drafter->cache_.trace()->push_back(
            {&drafter->model_, drafter->cache_.batch(), 1, drafter_context + j, /*graph=*/true});
      }
    }
  }
  return out;
}

bool ModelStream::CanStepZipAr(const ZipArGraphs& graphs, int64_t inputs,
                               const SamplingParams& sampling) const {
  return graphs.Fits(cache_, inputs, sampling);
}

StatusOr<ZipArGraphs::Output> ModelStream::StepZipAr(const ZipArGraphs& graphs,
                                                     ZipArGraphs::Call call) {
  const int64_t inputs = static_cast<int64_t>(call.tokens.size());
  if (!CanStepZipAr(graphs, inputs, call.sampling)) {
    return FailedPreconditionError("ModelStream::StepZipAr: no ZipAR graph fits a forward of " +
                                   std::to_string(inputs) + " tokens");
  }
  // Raster positions become sequence positions by one offset (every architecture's
  // TokenPosition is affine), added in the graph.
  call.position_offset = model_.TokenPosition(condition_rows_, 0);
  if (model_.TokenPosition(condition_rows_, 1) != call.position_offset + 1) {
    return FailedPreconditionError(
        "ModelStream::StepZipAr: the model's raster positions are not consecutive");
  }
  call.cache = &cache_;
  call.condition_rows = condition_rows_;
  const int64_t context = cache_.length();
  MULO_ASSIGN_OR_RETURN(ZipArGraphs::Output out, RunStepGraphs(loop_, graphs, call));
  CountForward();
  if (cache_.trace() != nullptr) {
    cache_.trace()->push_back(
        {&model_, cache_.batch(), ZipArGraphs::RowsOf(inputs), context, /*graph=*/true});
  }
  return out;
}

bool ModelStream::AdoptZipArChain(ZipArGraphs::Chain& chain) {
  // Raster positions become sequence positions by one offset, as in StepZipAr.
  const int64_t offset = model_.TokenPosition(condition_rows_, 0);
  if (model_.TokenPosition(condition_rows_, 1) != offset + 1) return false;
  for (ZipArGraphs::Call& call : chain.forwards) {
    call.cache = &cache_;
    call.condition_rows = condition_rows_;
    call.position_offset = offset;
  }
  return true;
}

bool ModelStream::CanStepZipArChain(const ZipArGraphs& graphs, ZipArGraphs::Chain chain) {
  return AdoptZipArChain(chain) && graphs.FitsChain(chain);
}

StatusOr<ZipArGraphs::Output> ModelStream::StepZipArChain(const ZipArGraphs& graphs,
                                                          ZipArGraphs::Chain chain) {
  if (!AdoptZipArChain(chain) || !graphs.FitsChain(chain)) {
    return FailedPreconditionError("ModelStream::StepZipArChain: no ZipAR graph fits a chain of " +
                                   std::to_string(chain.forwards.size()) + " forwards");
  }
  // Each forward's context: the cached rows its plan lists.
  std::vector<int64_t> contexts;
  for (const ZipArGraphs::Call& call : chain.forwards) {
    contexts.push_back(condition_rows_ + static_cast<int64_t>(call.cached.size()));
  }
  MULO_ASSIGN_OR_RETURN(ZipArGraphs::Output out, RunStepGraphs(loop_, graphs, chain));
  for (size_t j = 0; j < chain.forwards.size(); ++j) {
    CountForward();
    if (cache_.trace() != nullptr) {
      const int64_t inputs = static_cast<int64_t>(chain.forwards[j].tokens.size());
      cache_.trace()->push_back(
          {&model_, cache_.batch(), ZipArGraphs::RowsOf(inputs), contexts[j], /*graph=*/true});
    }
  }
  return out;
}

StatusOr<std::vector<int64_t>> ModelStream::DrawAndFeedRow(const torch::Tensor& uniforms,
                                                           const SamplingParams& sampling,
                                                           int64_t count) {
  if (!CanFeedRow(count, sampling)) {
    return FailedPreconditionError("ModelStream::DrawAndFeedRow: no row graph fits " +
                                   std::to_string(count) + " tokens of this stream");
  }
  MULO_ASSIGN_OR_RETURN(RowGraphs::Output out, FeedRow(uniforms, sampling, count));
  fed_.insert(fed_.end(), out.tokens.begin(), out.tokens.end());
  return out.tokens;
}

StatusOr<torch::Tensor> ModelStream::DrawAndFeedRowOnDevice(const torch::Tensor& uniforms,
                                                            const SamplingParams& sampling,
                                                            int64_t count) {
  if (!CanFeedRowOnDevice(count, sampling)) {
    return FailedPreconditionError("ModelStream::DrawAndFeedRowOnDevice: no row graph fits " +
                                   std::to_string(count) + " tokens of this stream");
  }
  MULO_ASSIGN_OR_RETURN(RowGraphs::Output out, FeedRow(uniforms, sampling, count));
  fed_.insert(fed_.end(), count, -1);
  return out.drafts;
}

StatusOr<RowGraphs::Output> ModelStream::FeedRow(const torch::Tensor& uniforms,
                                                 const SamplingParams& sampling, int64_t count) {
  const RowGraphs& rows = *RowGraphs::Of(cache_);
  const int64_t at = static_cast<int64_t>(fed_.size()), context = cache_.length();
  const RowGraphs::Call call{
      &cache_, next_logits_, /*prefix=*/{}, uniforms, sampling,
      model_.TokenPosition(condition_rows_, at),
      model_.TokenPosition(condition_rows_, std::max<int64_t>(0, model_.num_image_tokens() - 2))};
  MULO_ASSIGN_OR_RETURN(RowGraphs::Output out, RunStepGraphs(loop_, rows, call));
  next_logits_ = out.logits;
  next_hidden_ = torch::Tensor();
  for (int64_t j = 0; j < count; ++j) {
    CountForward();  // a row's forwards count as the forwards they are, replayed together
    if (cache_.trace() != nullptr) {
      cache_.trace()->push_back({&model_, cache_.batch(), 1, context + j, /*graph=*/true});
    }
  }
  return out;
}

StatusOr<ForwardOutput> ModelStream::FeedSet(const std::vector<int64_t>& ids,
                                             const std::vector<int64_t>& positions,
                                             const torch::Tensor& mask, LogitsMode mode) {
  if (ids.empty() || ids.size() != positions.size()) {
    return InvalidArgumentError("ModelStream::FeedSet: expected as many positions as ids (>= 1)");
  }
  std::vector<int64_t> sequence_positions;
  for (int64_t p : positions)
    sequence_positions.push_back(model_.TokenPosition(condition_rows_, p));
  const int64_t n = static_cast<int64_t>(ids.size());
  auto input =
      torch::tensor(ids, torch::kInt64).unsqueeze(0).expand({cache_.batch(), n}).contiguous();
  const auto sequence = torch::tensor(sequence_positions, torch::kInt64);
  ForwardOutput out;
  if (loop_ != nullptr) {
    MULO_ASSIGN_OR_RETURN(torch::Tensor embeddings, model_.EmbedTokens(input));
    MULO_ASSIGN_OR_RETURN(out, RunForward(embeddings, sequence, mask, mode));
  } else {
    // By ids, so that a GPU model may replay a captured graph with the mask as its input.
    MULO_ASSIGN_OR_RETURN(out, model_.ForwardTokens(cache_, input, sequence, mask, mode));
  }
  CountForward();
  return out;
}

StatusOr<ForwardOutput> ModelStream::FeedSetOnDevice(const torch::Tensor& ids,
                                                     const torch::Tensor& positions,
                                                     const torch::Tensor& mask, LogitsMode mode) {
  if (!ids.defined() || ids.dim() != 1 || ids.size(0) < 1 || !positions.defined() ||
      positions.sizes() != ids.sizes()) {
    return InvalidArgumentError(
        "ModelStream::FeedSetOnDevice: expected ids [n >= 1] and positions of the same shape");
  }
  // Raster positions become sequence positions by one offset (every architecture's
  // TokenPosition is affine), added on the device.
  const int64_t offset = model_.TokenPosition(condition_rows_, 0);
  if (model_.TokenPosition(condition_rows_, 1) != offset + 1) {
    return FailedPreconditionError(
        "ModelStream::FeedSetOnDevice: the model's raster positions are not consecutive");
  }
  const int64_t n = ids.size(0);
  MULO_ASSIGN_OR_RETURN(
      torch::Tensor embeddings,
      model_.EmbedDrawnTokens(ids.unsqueeze(0).expand({cache_.batch(), n}).contiguous()));
  MULO_ASSIGN_OR_RETURN(ForwardOutput out,
                        RunForward(embeddings, positions.to(torch::kInt64) + offset, mask, mode));
  CountForward();
  return out;
}

Status ModelStream::Keep(const std::vector<int64_t>& rows, std::vector<int64_t> tokens) {
  if (static_cast<int64_t>(rows.size()) != condition_rows() + static_cast<int64_t>(tokens.size())) {
    return InvalidArgumentError("ModelStream::Keep: " + std::to_string(rows.size()) + " rows for " +
                                std::to_string(tokens.size()) + " tokens and " +
                                std::to_string(condition_rows()) + " condition rows");
  }
  MULO_RETURN_IF_ERROR(cache_.Compact(rows));
  fed_ = std::move(tokens);
  return OkStatus();
}

Status ModelStream::Truncate(int64_t n) {
  if (n < 0 || n > static_cast<int64_t>(fed_.size())) {
    return OutOfRangeError("ModelStream::Truncate: " + std::to_string(n) + " is outside [0, " +
                           std::to_string(fed_.size()) + "]");
  }
  fed_.resize(n);
  return cache_.Truncate(condition_rows() + n);
}

DecodeSession::DecodeSession(const DecodeRequest& request, const ModelSet& models,
                             ProgressSink& progress, const CancelToken& cancel)
    : request_(request),
      models_(models),
      cancel_(cancel),
      rows_(models.target->grid_size(), &progress),
      rngs_{Rng(request.sampling.seed, RngStream::kTarget),
            Rng(request.sampling.seed, RngStream::kDrafter),
            Rng(request.sampling.seed, RngStream::kAcceptance)},
      commit_map_(models.target->grid_size() * models.target->grid_size()),
      start_(std::chrono::steady_clock::now()) {
  committed_.reserve(num_tokens());
}

StatusOr<std::unique_ptr<DecodeSession>> DecodeSession::Start(const std::string& method,
                                                              const DecodeRequest& request,
                                                              const ModelSet& models,
                                                              ProgressSink& progress,
                                                              const CancelToken& cancel) {
  if (models.target == nullptr) {
    return FailedPreconditionError(method + ": no target model loaded");
  }
  MULO_RETURN_IF_ERROR(ValidateSamplingParams(request.sampling, models.target->vocab_size()));
  return std::unique_ptr<DecodeSession>(new DecodeSession(request, models, progress, cancel));
}

StatusOr<ModelStream*> DecodeSession::Open(const TokenModel& model, StreamRole role,
                                           const SamplingParams* sampling) {
  auto timer = Time(Phase::kPrefill);
  const int64_t batch = CfgBatch(sampling != nullptr ? *sampling : request_.sampling);
  MULO_ASSIGN_OR_RETURN(torch::Tensor condition,
                        model.EmbedCondition(request_.condition, batch == 2));
  streams_.push_back(std::make_unique<ModelStream>(
      model, NewCache(model, batch, model.CacheRows(condition.size(1))), role, &stats_,
      request_.trace, request_.loop));
  MULO_RETURN_IF_ERROR(streams_.back()->Prefill(condition));
  return streams_.back().get();
}

namespace {

// A cache of `model` (a TokenModel or the EAGLE head) from the request's reservation, else
// of its own.
template <typename Model>
KvCache ReservedOrOwnCache(const Model& model, KvReservation* kv, int64_t batch,
                           int64_t capacity) {
  if (kv != nullptr) {
    if (std::optional<KvCache> pooled = kv->Take(&model, batch)) return *std::move(pooled);
  }
  return model.NewCache(batch, capacity);
}

}  // namespace

KvCache DecodeSession::NewCache(const TokenModel& model, int64_t batch, int64_t capacity) {
  return ReservedOrOwnCache(model, request_.kv, batch, capacity);
}

KvCache DecodeSession::NewCache(const EagleHead& head, int64_t batch, int64_t capacity) {
  return ReservedOrOwnCache(head, request_.kv, batch, capacity);
}

StatusOr<torch::Tensor> DecodeSession::RunHead(const EagleHead& head, const HeadCall& call) {
  if (request_.loop != nullptr) return request_.loop->Run(head, call);
  return head.Forward(*call.cache, call.token_embeddings, call.features, call.mask);
}

StatusOr<EagleTreeGraphs::Draft> DecodeSession::DraftTree(const EagleTreeGraphs& graphs,
                                                          const EagleTreeGraphs::Call& call) {
  return RunStepGraphs(request_.loop, graphs, call);
}

StatusOr<std::vector<int64_t>> DecodeSession::Resample(const Resampler& resampler,
                                                       const std::vector<int64_t>& ids, int64_t h,
                                                       int64_t w) {
  if (request_.loop == nullptr) return resampler.Apply(ids, h, w);
  MULO_ASSIGN_OR_RETURN(
      torch::Tensor out,
      request_.loop->Run(resampler, {torch::tensor(ids, torch::kInt64).unsqueeze(0), h, w}));
  return ReadIds(out);
}

StatusOr<torch::Tensor> DecodeSession::ResampleDrawn(const Resampler& resampler,
                                                     const torch::Tensor& ids, int64_t h,
                                                     int64_t w) {
  const ResampleCall call{ids.reshape({1, -1}), h, w, /*drawn=*/true};
  // From the worker's graphs where it has them (MuLo-SD's U_r over a reservation).
  const ResamplerGraphs* graphs = request_.kv != nullptr ? request_.kv->GraphsOf(resampler) : nullptr;
  torch::Tensor out;
  if (graphs != nullptr && graphs->Fits(call)) {
    if (request_.loop != nullptr) {
      MULO_ASSIGN_OR_RETURN(out, request_.loop->Run(*graphs, call));
    } else {
      MULO_ASSIGN_OR_RETURN(std::vector<torch::Tensor> outputs, graphs->Run({call}));
      out = std::move(outputs[0]);
    }
  } else {
    MULO_ASSIGN_OR_RETURN(out, request_.loop != nullptr ? request_.loop->Run(resampler, call)
                                                       : resampler.ApplyDrawn(call.ids, h, w));
  }
  return out.flatten();
}

torch::Tensor DecodeSession::Probabilities(const torch::Tensor& logits) const {
  return Probabilities(logits, request_.sampling);
}

torch::Tensor DecodeSession::Probabilities(const torch::Tensor& logits,
                                           const SamplingParams& sampling) const {
  return ToProbabilities(GuidedLogits(logits, sampling.cfg_scale), sampling);
}

torch::Tensor DecodeSession::RankingProbabilities(const torch::Tensor& logits) const {
  if (!greedy()) return Probabilities(logits);
  SamplingParams ranking = request_.sampling;
  ranking.temperature = 1.0;
  ranking.top_k = 0;
  ranking.top_p = 1.0;
  return Probabilities(logits, ranking);
}

int64_t DecodeSession::Draw(const torch::Tensor& logits, RngStream stream) {
  return Draw(logits, stream, request_.sampling);
}

int64_t DecodeSession::Draw(const torch::Tensor& logits, RngStream stream,
                            const SamplingParams& sampling) {
  Rng& draws = rng(stream);
  const PreparedTokenDraw draw =
      PrepareTokenDraw(GuidedLogits(logits, sampling.cfg_scale), sampling, draws);
  // SampleToken's one read, through the request's engine loop (batched with other requests').
  StatusOr<torch::Tensor> host = HostReadWith(request_.loop, draw.to_read, draw.dtype);
  // Draw returns no Status: a failed read is thrown, and the step's guard
  // (SteppedMethod::Decode) makes it the request's INTERNAL error, as a failed lone read is.
  if (!host.ok()) throw std::runtime_error(std::string(host.status().message()));
  return FinishTokenDraw(draw, *host, draws);
}

UniformCache& DecodeSession::uniforms(RngStream stream) {
  std::unique_ptr<UniformCache>& cache = uniform_caches_[static_cast<int>(stream)];
  if (cache == nullptr) cache = std::make_unique<UniformCache>(&rng(stream), device());
  return *cache;
}

torch::Tensor DecodeSession::DrawNumbers(RngStream stream, int64_t count,
                                         const SamplingParams* sampling) {
  const SamplingParams& draws = sampling != nullptr ? *sampling : request_.sampling;
  return draws.temperature == 0.0 ? torch::Tensor() : uniforms(stream).Take(count);
}

VerifierRngs DecodeSession::verifier_rngs() {
  return {&rng(RngStream::kAcceptance), &rng(RngStream::kTarget), &uniforms(RngStream::kAcceptance),
          &uniforms(RngStream::kTarget), request_.loop, request_.loop};
}

StatusOr<torch::Tensor> DecodeSession::DrawOnDevice(const torch::Tensor& logits,
                                                    const torch::Tensor& uniform) {
  return DrawOnDevice(logits, uniform, request_.sampling);
}

StatusOr<torch::Tensor> DecodeSession::DrawOnDevice(const torch::Tensor& logits,
                                                    const torch::Tensor& uniform,
                                                    const SamplingParams& sampling) {
  const DrawCall call{logits, uniform, sampling};
  if (request_.loop != nullptr) return request_.loop->Draw(call);
  return GuardTorch("DrawOnDevice", [&]() -> StatusOr<torch::Tensor> { return DrawTokens(call); });
}

torch::Tensor DecodeSession::DrawRowsOnDevice(const torch::Tensor& logits, RngStream stream) {
  return DrawTokens({logits, DrawNumbers(stream, logits.size(1)), request_.sampling});
}

StatusOr<std::vector<int64_t>> DecodeSession::ReadIds(const torch::Tensor& tensor) {
  return GuardTorch("ReadIds", [&]() -> StatusOr<std::vector<int64_t>> {
    return HostReadIdsWith(request_.loop, tensor);
  });
}

StatusOr<torch::Tensor> DecodeSession::ReadHost(const torch::Tensor& tensor,
                                                torch::ScalarType dtype) {
  return GuardTorch("ReadHost", [&]() -> StatusOr<torch::Tensor> {
    return HostReadWith(request_.loop, tensor, dtype);
  });
}

void DecodeSession::Commit(std::vector<int64_t> tokens) {
  committed_ = std::move(tokens);
  EmitRows();
}

void DecodeSession::Append(int64_t token) {
  committed_.push_back(token);
  EmitRows();
}

void DecodeSession::EmitRows() {
  if (static_cast<int64_t>(committed_.size()) / grid() <= rows_.rows_sent()) return;
  rows_.Commit(std::vector<int32_t>(committed_.begin(), committed_.end()));
}

void DecodeSession::CommitRows(const std::vector<int64_t>& grid_tokens,
                               const std::vector<bool>& row_done) {
  const int64_t width = grid();
  int64_t rows = 0;
  while (rows < static_cast<int64_t>(row_done.size()) && row_done[rows]) ++rows;
  if (rows * width <= static_cast<int64_t>(committed_.size())) return;
  Commit(std::vector<int64_t>(grid_tokens.begin(), grid_tokens.begin() + rows * width));
}

DecodeResult DecodeSession::Finish() {
  DecodeResult result;
  result.tokens.assign(committed_.begin(), committed_.end());
  result.tokens.resize(num_tokens());
  stats_.tokens = num_tokens();
  stats_.commit_map = commit_map_.codes();
  stats_.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  result.stats = stats_;
  return result;
}

StatusOr<DecodeResult> SteppedMethod::Decode(const DecodeRequest& request, const ModelSet& models,
                                             ProgressSink& progress,
                                             const CancelToken& cancel) const {
  MULO_RETURN_IF_ERROR(Validate(models));
  MULO_ASSIGN_OR_RETURN(std::unique_ptr<DecodeSession> session,
                        DecodeSession::Start(name(), request, models, progress, cancel));
  return GuardTorch(name(), [&]() -> StatusOr<DecodeResult> {
    at::NoGradGuard no_grad;
    // The request runs in one execution context from Begin to Finish (its fiber on the
    // engine loop, or this thread), so the context's read count over that span is its own.
    const int64_t reads_before = HostReadCount();
    const OpCounts ops_before = ThreadOpCounts();
    MULO_ASSIGN_OR_RETURN(std::unique_ptr<State> state, Begin(*session));
    while (!session->done()) {
      MULO_RETURN_IF_ERROR(session->CheckCancelled());
      MULO_RETURN_IF_ERROR(state->Step(*session));
      // Between steps the loop may admit new requests (a cancelled one leaves here).
      if (request.loop != nullptr) request.loop->StepDone();
    }
    session->stats().host_syncs = HostReadCount() - reads_before;
    const OpCounts ops_after = ThreadOpCounts();
    session->stats().dispatched_ops = ops_after.dispatched - ops_before.dispatched;
    session->stats().kernel_ops = ops_after.kernels - ops_before.kernels;
    session->stats().graph_replays = ops_after.graph_replays - ops_before.graph_replays;
    return session->Finish();
  });
}

}  // namespace mulo::engine
