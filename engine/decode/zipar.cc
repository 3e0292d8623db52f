#include "engine/decode/zipar.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/zipar_graphs.h"
#include "engine/decode/zipar_rows.h"
#include "engine/sampling/token_draw.h"

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

// The planned forward fed, its tokens drawn (and, with `read`, read) by one replay of the
// graphs; the placeholders' rows dropped after it, as FeedPlanned does.
Status FeedOnGraphs(DecodeSession& session, ModelStream& stream, ZipArRows& rows,
                    const ZipArGraphs& graphs, const ZipArRows::Forward& forward, RngStream numbers,
                    const SamplingParams& sampling, bool read) {
  const std::vector<std::pair<int64_t, int64_t>> draws = DrawOrder(forward);
  ZipArGraphs::Call call = PlannedCall(rows, forward, read);
  if (!draws.empty()) {
    call.uniforms = session.DrawNumbers(numbers, static_cast<int64_t>(draws.size()), &sampling);
  }
  call.sampling = sampling;
  MULO_ASSIGN_OR_RETURN(const ZipArGraphs::Output out, stream.StepZipAr(graphs, std::move(call)));
  MULO_RETURN_IF_ERROR(stream.cache().Truncate(stream.cache().length() - forward.placeholders));
  rows.Fed(forward);
  for (size_t j = 0; j < draws.size(); ++j) rows.Set(draws[j].first, read ? out.drawn[j] : -1);
  return OkStatus();
}

// The ids `rows` holds only on the device (graphs' Tokens over `stream`'s cache), read and
// recorded, and `forward`'s inputs given theirs.
Status KnowTokens(DecodeSession& session, ModelStream& stream, const ZipArGraphs& graphs,
                  ZipArRows& rows, ZipArRows::Forward& forward) {
  const std::vector<int64_t> unknown = rows.Unknown();
  if (unknown.empty()) return OkStatus();
  MULO_ASSIGN_OR_RETURN(const std::vector<int64_t> tokens,
                        session.ReadIds(graphs.Tokens(stream.cache())));
  for (int64_t raster : unknown) rows.Resolve(raster, tokens[raster]);
  for (ZipArRows::Input& in : forward.inputs) in.token = rows.tokens()[in.source];
  return OkStatus();
}

// The planned forward with its mask fed eagerly, then the drawing rows gathered in position
// order (one gather, or the forward's own row when it is one) and drawn by `draw_rows`, which
// returns their ids.
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
  const torch::Tensor logits =
      inputs.size() == 1
          ? out.logits.narrow(1, inputs[0], 1)
          : out.logits.index_select(
                1, Upload(torch::tensor(inputs, torch::kInt64), out.logits.device()));
  MULO_ASSIGN_OR_RETURN(const std::vector<int64_t> drawn, draw_rows(logits));
  for (size_t j = 0; j < draws.size(); ++j) rows.Set(draws[j].first, drawn[j]);
  return OkStatus();
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
      const KvReservation* kv = session.reservation();
      const ZipArGraphs* graphs =
          kv != nullptr ? kv->ZipArGraphsOf(*session.models().target) : nullptr;
      MULO_RETURN_IF_ERROR(
          StepRows(session, *target_, rows_, graphs, RngStream::kTarget, session.sampling()));
      ++session.stats().verify_steps;
    }
    session.CommitRows(rows_.tokens(), rows_.RowsDone());
    return OkStatus();
  }

 private:
  ModelStream* target_;
  ZipArRows rows_;
};

}  // namespace

ZipArGraphs::Call PlannedCall(const ZipArRows& rows, const ZipArRows::Forward& forward, bool read) {
  ZipArGraphs::Call call;
  for (const ZipArRows::Input& in : forward.inputs) {
    call.tokens.push_back(in.token);
    call.rasters.push_back(in.raster);
    call.placeholders.push_back(in.placeholder);
    call.sources.push_back(in.source);
  }
  for (const auto& draw : DrawOrder(forward)) {
    call.draws.push_back(draw.second);
    call.predicts.push_back(draw.first);
  }
  call.read = read;
  call.cached = rows.cached();
  return call;
}

void PlannedAsDrawnOnDevice(ZipArRows& rows, const ZipArRows::Forward& forward) {
  rows.Fed(forward);
  for (const auto& draw : DrawOrder(forward)) rows.Set(draw.first, -1);
}

Status StepRows(DecodeSession& session, ModelStream& stream, ZipArRows& rows,
                const ZipArGraphs* graphs, RngStream numbers, const SamplingParams& sampling,
                bool read) {
  ZipArRows::Forward forward = rows.Next(stream.condition_rows(), /*with_mask=*/false);
  const int64_t inputs = static_cast<int64_t>(forward.inputs.size());
  // A schedule narrowed by a test's Visibility is known to its Mask alone.
  if (graphs != nullptr && !rows.narrowed() && stream.CanStepZipAr(*graphs, inputs, sampling)) {
    return FeedOnGraphs(session, stream, rows, *graphs, forward, numbers, sampling, read);
  }
  if (graphs != nullptr) MULO_RETURN_IF_ERROR(KnowTokens(session, stream, *graphs, rows, forward));
  forward.mask = rows.Mask(forward, stream.condition_rows());
  return FeedPlanned(stream, rows, forward, [&](const torch::Tensor& logits) {
    return session.ReadIds(
        DrawTokens({logits, session.DrawNumbers(numbers, logits.size(1), &sampling), sampling}));
  });
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
