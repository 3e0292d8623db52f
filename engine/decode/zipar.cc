#include "engine/decode/zipar.h"

#include <algorithm>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/zipar_graphs.h"
#include "engine/decode/zipar_rows.h"

namespace mulo::engine {
namespace {

// The predicting inputs of `forward` as (raster predicted, input index), in raster order:
// the order their tokens are drawn in.
std::vector<std::pair<int64_t, int64_t>> DrawOrder(const ZipArRows::Forward& forward) {
  std::vector<std::pair<int64_t, int64_t>> draws;
  for (size_t i = 0; i < forward.inputs.size(); ++i) {
    if (forward.inputs[i].predicts >= 0) {
      draws.emplace_back(forward.inputs[i].predicts, static_cast<int64_t>(i));
    }
  }
  std::sort(draws.begin(), draws.end());
  return draws;
}

class ZipArState : public SteppedMethod::State {
 public:
  ZipArState(ModelStream* target, ZipArRows rows) : target_(target), rows_(std::move(rows)) {}

  // One forward advances every open row by one token. The stream's cache holds the tokens in
  // the order they were fed (rows_.cached()), not in raster order, so the stream's fed() stays
  // empty: every row of the cache carries its own position and the mask does the rest. From
  // the worker's ZipAR graphs where they fit (one replay, one read), else eagerly.
  Status Step(DecodeSession& session) override {
    {
      auto timer = session.Time(Phase::kTargetForward);
      ZipArRows::Forward forward = rows_.Next(target_->condition_rows(), /*with_mask=*/false);
      const KvReservation* kv = session.reservation();
      const ZipArGraphs* graphs = kv != nullptr && !rows_.narrowed()
                                      ? kv->ZipArGraphsOf(*session.models().target)
                                      : nullptr;
      const int64_t inputs = static_cast<int64_t>(forward.inputs.size());
      if (graphs != nullptr && target_->CanStepZipAr(*graphs, inputs, session.sampling())) {
        MULO_RETURN_IF_ERROR(FeedOnGraphs(session, *graphs, forward));
      } else {
        forward.mask = rows_.Mask(forward, target_->condition_rows());
        const auto draw = [&](const torch::Tensor& logits) {
          return session.ReadIds(session.DrawRowsOnDevice(logits, RngStream::kTarget));
        };
        MULO_RETURN_IF_ERROR(FeedPlanned(*target_, rows_, forward, draw));
      }
      ++session.stats().verify_steps;
    }
    session.CommitRows(rows_.tokens(), rows_.RowsDone());
    return OkStatus();
  }

 private:
  // The planned forward fed, its tokens drawn and read by one replay of the graphs; the
  // placeholders' rows dropped after it, as FeedPlanned does.
  Status FeedOnGraphs(DecodeSession& session, const ZipArGraphs& graphs,
                      const ZipArRows::Forward& forward) {
    const std::vector<std::pair<int64_t, int64_t>> draws = DrawOrder(forward);
    ZipArGraphs::Call call;
    for (const ZipArRows::Input& in : forward.inputs) {
      call.tokens.push_back(in.token);
      call.rasters.push_back(in.raster);
      call.placeholders.push_back(in.placeholder);
    }
    for (const auto& draw : draws) call.draws.push_back(draw.second);
    call.cached = rows_.cached();
    if (!draws.empty()) {
      call.uniforms = session.DrawNumbers(RngStream::kTarget, static_cast<int64_t>(draws.size()));
    }
    call.sampling = session.sampling();
    MULO_ASSIGN_OR_RETURN(const ZipArGraphs::Output out,
                          target_->StepZipAr(graphs, std::move(call)));
    MULO_RETURN_IF_ERROR(
        target_->cache().Truncate(target_->cache().length() - forward.placeholders));
    rows_.Fed(forward);
    for (size_t j = 0; j < draws.size(); ++j) rows_.Set(draws[j].first, out.drawn[j]);
    return OkStatus();
  }

  ModelStream* target_;
  ZipArRows rows_;
};

}  // namespace

Status AdvanceRows(
    ModelStream& stream, ZipArRows& rows,
    const std::function<StatusOr<std::vector<int64_t>>(const torch::Tensor&)>& draw_rows) {
  return FeedPlanned(stream, rows, rows.Next(stream.condition_rows()), draw_rows);
}

Status FeedPlanned(
    ModelStream& stream, ZipArRows& rows, const ZipArRows::Forward& forward,
    const std::function<StatusOr<std::vector<int64_t>>(const torch::Tensor&)>& draw_rows) {
  std::vector<int64_t> ids, positions;
  for (const ZipArRows::Input& in : forward.inputs) {
    ids.push_back(in.token);
    positions.push_back(in.raster);
  }
  MULO_ASSIGN_OR_RETURN(ForwardOutput out, stream.FeedSet(ids, positions, forward.mask));
  MULO_RETURN_IF_ERROR(stream.cache().Truncate(stream.cache().length() - forward.placeholders));
  rows.Fed(forward);
  const std::vector<std::pair<int64_t, int64_t>> draws = DrawOrder(forward);
  if (draws.empty()) return OkStatus();
  std::vector<int64_t> inputs;
  for (const auto& draw : draws) inputs.push_back(draw.second);
  // The drawing rows in position order: one gather, or the forward's own row when it is one.
  const torch::Tensor logits =
      inputs.size() == 1
          ? out.logits.narrow(1, inputs[0], 1)
          : out.logits.index_select(
                1, Upload(torch::tensor(inputs, torch::kInt64), out.logits.device()));
  MULO_ASSIGN_OR_RETURN(const std::vector<int64_t> drawn, draw_rows(logits));
  for (size_t j = 0; j < draws.size(); ++j) rows.Set(draws[j].first, drawn[j]);
  return OkStatus();
}

Status ZipArDecoder::Validate(const ModelSet& models) const {
  if (models.target == nullptr) return FailedPreconditionError("zipar: no target model");
  const int64_t grid = models.target->grid_size();
  if (options_.window < 1 || options_.window > grid) {
    return InvalidArgumentError("zipar.window: must be in [1, " + std::to_string(grid) +
                                "] (the grid width is plain AR)");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<SteppedMethod::State>> ZipArDecoder::Begin(
    DecodeSession& session) const {
  MULO_ASSIGN_OR_RETURN(ModelStream * target,
                        session.Open(*session.models().target, StreamRole::kTarget));
  ZipArRows rows(session.grid(), options_.window, {}, options_.visible);
  // Token 0 comes straight from the target's prefill, as in AR.
  rows.Set(0, session.Draw(target->next_logits(), RngStream::kTarget));
  return std::unique_ptr<State>(std::make_unique<ZipArState>(target, std::move(rows)));
}

}  // namespace mulo::engine
