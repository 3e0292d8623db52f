#include "engine/decode/mulo_verify_graphs.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"
#include "engine/model/stream_fields.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

namespace {

// The ints' columns per stream: slot, cache length before the tail, the tail's first token's
// sequence position, the last position a row may take.
constexpr int64_t kStreamFields = 4;
// Per request: cfg_scale, temperature, tau, top_p (float64 bits), then top_k, then the tail's
// length; then every request's tail, padded to the key's rows.
constexpr int64_t kRequestParams = 4;
constexpr int64_t kRequestFields = kRequestParams + 2;
// The result's blocks per request, each `drafts` wide: the drafts, the pooled and own
// probabilities (float64 bits), re-sampled or not, the step's tokens; then the carried ids.
constexpr int64_t kResultBlocks = 5;
// Step graphs' drafter ints: per stream its slot, cache length, the row's first position and
// the last position fed; per request its cfg_scale, temperature and top_p (float64 bits), its
// top_k and the row's first index in the drafter's grid; then every request's grid of drafter
// tokens (its prefix, 0 after it).
constexpr int64_t kDrafterStreamFields = 4;
constexpr int64_t kDrafterParams = 3;
constexpr int64_t kDrafterRequestFields = kDrafterParams + 2;

// Whether any call (or, for step graphs, its drafter row) filters by top-k or top-p.
bool AnyFilters(const std::vector<MuloVerifyGraphs::Call>& calls, int64_t vocab,
                int64_t drafter_vocab) {
  return std::any_of(calls.begin(), calls.end(), [&](const MuloVerifyGraphs::Call& call) {
    return HasFilters(call.sampling, vocab) ||
           (call.drafter.cache != nullptr && HasFilters(call.drafter.sampling, drafter_vocab));
  });
}

int64_t DrafterIntsSize(int64_t streams, int64_t grid) {
  const int64_t requests = streams / 2;
  return kDrafterStreamFields * streams + kDrafterRequestFields * requests +
         requests * grid * grid;
}

// The drafter's ints of a replay (DrafterIntsSize of them), pads with the scratch slot,
// length 0, greedy and an empty grid.
std::vector<int64_t> DrafterInts(const std::vector<MuloVerifyGraphs::Call>& calls,
                                 int64_t streams, int64_t grid, int64_t scratch_slot) {
  const int64_t requests = streams / 2;
  std::vector<int64_t> ints(DrafterIntsSize(streams, grid), 0);
  double* const params = reinterpret_cast<double*>(ints.data() + kDrafterStreamFields * streams);
  int64_t* const top_k = ints.data() + kDrafterStreamFields * streams + kDrafterParams * requests;
  int64_t* const firsts = top_k + requests;
  int64_t* const grids = firsts + requests;
  for (int64_t s = 0; s < streams; ++s) ints[s] = scratch_slot;
  for (size_t i = 0; i < calls.size(); ++i) {
    const MuloVerifyGraphs::DrafterRow& row = calls[i].drafter;
    const int64_t r = static_cast<int64_t>(i);
    if (row.cache != nullptr) {  // step graphs draft its row (graphs that up-sample do not)
      PutStreamFields(*row.cache, row.first_position, row.last_position, r, streams, ints.data());
    }
    params[r] = row.sampling.cfg_scale;
    params[requests + r] = row.sampling.temperature;
    params[2 * requests + r] = row.sampling.top_p;
    top_k[r] = row.sampling.top_k;
    firsts[r] = static_cast<int64_t>(row.prefix.size());
    std::copy(row.prefix.begin(), row.prefix.end(), grids + r * grid * grid);
  }
  return ints;
}

int64_t IntsSize(int64_t streams, int64_t rows) {
  const int64_t requests = streams / 2;
  return kStreamFields * streams + kRequestFields * requests + requests * rows;
}

// The replay's ints (IntsSize(streams, rows) of them, laid out as Entry's): every call's fields,
// then pads that keep the scratch slot, length 0, greedy and a tail of one token 0.
std::vector<int64_t> StepInts(const std::vector<MuloVerifyGraphs::Call>& calls, int64_t streams,
                              int64_t rows, int64_t scratch_slot) {
  const int64_t requests = streams / 2;
  std::vector<int64_t> ints(IntsSize(streams, rows), 0);
  double* const params = reinterpret_cast<double*>(ints.data() + kStreamFields * streams);
  static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
  int64_t* const top_k = ints.data() + kStreamFields * streams + kRequestParams * requests;
  int64_t* const tail_lengths = top_k + requests;
  int64_t* const tails = tail_lengths + requests;
  for (int64_t s = 0; s < streams; ++s) ints[s] = scratch_slot;
  for (int64_t r = 0; r < requests; ++r) tail_lengths[r] = 1;
  for (size_t i = 0; i < calls.size(); ++i) {
    const MuloVerifyGraphs::Call& call = calls[i];
    const int64_t r = static_cast<int64_t>(i);
    PutStreamFields(*call.cache, call.first_position, call.last_position, r, streams, ints.data());
    params[r] = call.sampling.cfg_scale;
    params[requests + r] = call.sampling.temperature;
    params[2 * requests + r] = call.tau;
    params[3 * requests + r] = call.sampling.top_p;
    top_k[r] = call.sampling.top_k;
    tail_lengths[r] = static_cast<int64_t>(call.tail.size());
    std::copy(call.tail.begin(), call.tail.end(), tails + r * rows);
  }
  return ints;
}

// One request's row of the result (`width` values from `host`), parsed without tensor
// operators.
MuloVerifyGraphs::Output ReadOutput(const int64_t* host, int64_t drafts, int64_t width) {
  const auto block = [&](int64_t b) { return host + b * drafts; };
  const double* const masses = reinterpret_cast<const double*>(block(1));
  MuloVerifyGraphs::Output out;
  out.drafts.assign(block(0), block(1));
  out.pooled.assign(masses, masses + drafts);
  out.own.assign(masses + drafts, masses + 2 * drafts);
  out.resampled.assign(block(3), block(4));
  out.tokens.assign(block(4), block(5));
  out.carried.assign(block(kResultBlocks), host + width);
  return out;
}

}  // namespace

bool MuloVerifyGraphs::Shape::operator==(const Shape& other) const {
  return drafts == other.drafts && grid == other.grid && radius == other.radius &&
         rejection == other.rejection && pooling.kind == other.pooling.kind &&
         (pooling.kind == Pooling::kNone ||
          (pooling.k == other.pooling.k && pooling.delta == other.pooling.delta &&
           pooling.lambda == other.pooling.lambda)) &&
         carried == other.carried && draft == other.draft && upsample == other.upsample;
}

struct MuloVerifyGraphs::Inputs {
  torch::Tensor ints, drafts, numbers, carried, first;  // as Entry's
  torch::Tensor drafter_ints, drafter_first, drafter_numbers;
};

struct MuloVerifyGraphs::Entry {
  // Static inputs on the device, each filled by one copy per replay:
  //   ints [IntsSize] int64: every stream's fields, column by column; every request's fields,
  //     column by column; every request's tail [requests, rows];
  //   drafts [requests, drafts] int64, numbers [requests, drafts] float64, carried
  //   [requests, carried] int64, first [streams, vocab] float32 (an empty tail's logits).
  torch::Tensor ints, drafts, numbers, carried, first;
  // Step graphs: drafter_ints [DrafterIntsSize], drafter_first [streams, drafter vocab] float32
  // (its row's first token's logits), drafter_numbers [requests, carried] float64.
  torch::Tensor drafter_ints, drafter_first, drafter_numbers;
  std::optional<KvCache> view;  // the pool's slots as the ints' slot column indexes them
  std::optional<KvCache> drafter_view;  // the drafter pool's, by the drafter ints' slots
  torch::Tensor drafter_logits;  // [streams, drafter vocab] after the row, every replay
  // [requests, kResultBlocks x drafts + carried] int64, written by every replay: the one read.
  torch::Tensor result;
  std::unique_ptr<ReplayableGraph> graph;
};

MuloVerifyGraphs::MuloVerifyGraphs(const KvPool& pool, Shape shape, RowGraphs::Model model,
                                   const LatentNeighbors* neighbors,
                                   std::optional<Drafting> drafting)
    : pool_(pool),
      shape_(shape),
      model_(std::move(model)),
      neighbors_(neighbors),
      drafting_(std::move(drafting)) {}

MuloVerifyGraphs::~MuloVerifyGraphs() = default;

PoolGraphs::Counts MuloVerifyGraphs::counts() const { return set_.counts(); }

int64_t MuloVerifyGraphs::RowsOf(int64_t tail) const {
  const int64_t rows = tail + shape_.drafts;
  return (rows + kRowsStep - 1) / kRowsStep * kRowsStep;
}

StatusOr<std::shared_ptr<MuloVerifyGraphs>> MuloVerifyGraphs::Capture(
    const KvPool& pool, Shape shape, RowGraphs::Model model, const LatentNeighbors* neighbors,
    std::optional<Drafting> drafting) {
  if (pool.scratch_slot() < 0) {
    return InvalidArgumentError("MuloVerifyGraphs: the pool needs a scratch slot for pad requests");
  }
  if (shape.drafts < 1 || shape.grid < 1 || shape.drafts % shape.grid != 0 || shape.radius < 0 ||
      shape.carried < 0) {
    return InvalidArgumentError(
        "MuloVerifyGraphs: a step needs drafts filling whole rows of a grid, radius >= 0");
  }
  if (neighbors == nullptr || neighbors->codebook_size() != model.vocab) {
    return InvalidArgumentError("MuloVerifyGraphs: needs the latent neighbours of the " +
                                std::to_string(model.vocab) + " tokens");
  }
  if (shape.upsamples() != drafting.has_value() || (shape.draft && shape.upsample)) {
    return InvalidArgumentError(
        "MuloVerifyGraphs: step graphs (Shape::draft) or graphs that "
        "up-sample (Shape::upsample), one of them, need the drafting "
        "models, and only they");
  }
  if (drafting) {
    const int64_t r = drafting->upsampler != nullptr ? drafting->upsampler->config().factor : 0;
    const bool pool_ok =
        !shape.draft || (drafting->pool != nullptr && drafting->pool->scratch_slot() >= 0 &&
                         shape.carried <= drafting->pool->slot_rows());
    if (!pool_ok || r < 1 || drafting->grid * r != shape.grid || shape.carried < 1 ||
        shape.carried % drafting->grid != 0 || shape.drafts != shape.carried * r * r) {
      return InvalidArgumentError(
          "MuloVerifyGraphs: step graphs need the drafter's pool with a scratch slot, and they "
          "and graphs that up-sample need U_r whose factor makes its grid the target's and "
          "whole drafter rows whose blocks are the drafts");
    }
  }
  std::shared_ptr<MuloVerifyGraphs> graphs(
      new MuloVerifyGraphs(pool, shape, std::move(model), neighbors, std::move(drafting)));
  const torch::Device device = graphs->model_.options.device();
  // Tails of 0 (the first step) to `drafts` tokens (the previous step re-sampled from its
  // first draft on).
  for (const bool filtered : {false, true}) {
    if (filtered && !shape.filters) break;
    for (int64_t streams = 2; streams <= PoolGraphs::Bucket(pool.slots()); streams *= 2) {
      for (int64_t rows = graphs->RowsOf(0); rows <= graphs->RowsOf(shape.drafts);
           rows += kRowsStep) {
        if (graphs->drafting_) {
          // Step graphs: U_r's input height (the drafter rows up to the step's last), 1 row of
          // drafter tokens or more, up to the grid.
          const int64_t grid = graphs->drafting_->grid;
          for (int64_t height = shape.carried / grid; height <= grid; ++height) {
            MULO_RETURN_IF_ERROR(graphs->CaptureKey(Key(streams, rows, height, filtered)));
          }
          continue;
        }
        MULO_RETURN_IF_ERROR(graphs->set_.CaptureSpans(pool, rows, device, [&](int64_t span) {
          return graphs->CaptureKey(Key(streams, rows, span, filtered));
        }));
      }
    }
  }
  return graphs;
}

void MuloVerifyGraphs::Body(Entry& e, int64_t streams, int64_t rows, int64_t last,
                            bool filtered) const {
  at::NoGradGuard no_grad;
  if (!drafting_) return Verify(e, e.drafts, e.carried, streams, rows, /*span=*/last, filtered);
  // Graphs that up-sample take the drafter's rows as the call's carried ids.
  torch::Tensor row = e.carried;
  if (shape_.draft) row = DrawDrafterRow(e, streams, /*height=*/last, filtered);
  const torch::Tensor drafts = UpSample(e, /*height=*/last, row);
  Verify(e, drafts, row, streams, rows, StepSpan(last), filtered);
}

int64_t MuloVerifyGraphs::StepSpan(int64_t height) const {
  // A request at `height` has committed (height x r - drafted rows) target rows before its
  // tail; a batch pads every request's tail and drafts to the longest, RowsOf(drafts) at most.
  const int64_t r = drafting_->upsampler->config().factor;
  const int64_t committed = height * r * shape_.grid - shape_.drafts;
  return std::min(pool_.slot_rows(),
                  ForwardGraphs::RoundUpToSpan(drafting_->target_prefix_rows + committed +
                                               RowsOf(shape_.drafts)));
}

int64_t MuloVerifyGraphs::DrafterSpan(int64_t height) const {
  return std::min(drafting_->pool->slot_rows(),
                  ForwardGraphs::RoundUpToSpan(drafting_->drafter_prefix_rows +
                                               height * drafting_->grid));
}

torch::Tensor MuloVerifyGraphs::DrawDrafterRow(Entry& e, int64_t streams, int64_t height,
                                               bool filtered) const {
  const Drafting& drafting = *drafting_;
  const int64_t requests = streams / 2, tokens = shape_.carried;
  // (1) The drafter's row, as its row graphs draw and feed it.
  RowGraphs::StepsIn in;
  in.logits = e.drafter_first;
  const int64_t params_at = kDrafterStreamFields * streams;
  const torch::Tensor params = e.drafter_ints.narrow(0, params_at, kDrafterParams * requests)
                                   .view(torch::kFloat64)
                                   .view({kDrafterParams, requests});
  in.cfg = params.select(0, 0).to(torch::kFloat32).unsqueeze(1);
  in.temperature = params.select(0, 1).to(torch::kFloat32);
  if (filtered) {
    in.filters = {e.drafter_ints.narrow(0, params_at + kDrafterParams * requests, requests)
                      .view({requests, 1}),
                  params.select(0, 2).to(torch::kFloat32).view({requests, 1})};
  }
  in.uniforms = e.drafter_numbers;
  in.lengths = e.drafter_ints.narrow(0, streams, streams);
  in.first_positions = e.drafter_ints.narrow(0, 2 * streams, streams);
  in.last_positions = e.drafter_ints.narrow(0, 3 * streams, streams);
  in.span = DrafterSpan(height);
  in.tokens = tokens;
  const RowGraphs::Steps steps = RowGraphs::DrawSteps(drafting.model, *e.drafter_view, in);
  e.drafter_logits = steps.logits;
  return steps.tokens;
}

torch::Tensor MuloVerifyGraphs::UpSample(Entry& e, int64_t height, const torch::Tensor& row) const {
  const Drafting& drafting = *drafting_;
  const int64_t requests = row.size(0), tokens = shape_.carried, grid = drafting.grid;
  const int64_t streams = 2 * requests;
  const auto long_options = torch::dtype(torch::kInt64).device(model_.options.device());
  // (2) U_r over the drafter's rows up to `height` with the row in place after the prefix, at
  // the eager step's height (its shapes, hence its bits, for a lone request).
  const int64_t params_at = kDrafterStreamFields * streams;
  const int64_t firsts_at = params_at + (kDrafterParams + 1) * requests;
  const torch::Tensor first = e.drafter_ints.narrow(0, firsts_at, requests).unsqueeze(1);
  const torch::Tensor low =
      e.drafter_ints.narrow(0, firsts_at + requests, requests * grid * grid)
          .view({requests, grid * grid})
          .narrow(1, 0, height * grid)
          .scatter(1, first + torch::arange(tokens, long_options).unsqueeze(0), row);
  StatusOr<torch::Tensor> up = drafting.upsampler->ApplyDrawn(low, height, grid);
  // The shapes were checked at Capture; a failure fails the capture (GuardTorch).
  TORCH_CHECK(up.ok(), "MuloVerifyGraphs: U_r failed: ", up.status().ToString());
  // Drafter index f starts target row f / grid x r, i.e. target index f x r x r.
  const int64_t r = drafting.upsampler->config().factor;
  return up->gather(1, first * (r * r) + torch::arange(shape_.drafts, long_options).unsqueeze(0));
}

void MuloVerifyGraphs::Verify(Entry& e, const torch::Tensor& draft_ids,
                              const torch::Tensor& carried_ids, int64_t streams, int64_t rows,
                              int64_t span, bool filtered) const {
  const int64_t requests = streams / 2, drafts = shape_.drafts, vocab = model_.vocab;
  const torch::Device device = model_.options.device();
  const auto long_options = torch::dtype(torch::kInt64).device(device);
  const torch::Tensor lengths = e.ints.narrow(0, streams, streams);
  const torch::Tensor first_positions = e.ints.narrow(0, 2 * streams, streams);
  const torch::Tensor last_positions = e.ints.narrow(0, 3 * streams, streams);
  const torch::Tensor params = e.ints.narrow(0, kStreamFields * streams, kRequestParams * requests)
                                   .view(torch::kFloat64)
                                   .view({kRequestParams, requests});
  const int64_t tails_at = kStreamFields * streams + kRequestFields * requests;
  const torch::Tensor tail_lengths =
      e.ints.narrow(0, tails_at - requests, requests).unsqueeze(1);  // [requests, 1]
  const torch::Tensor tails = e.ints.narrow(0, tails_at, requests * rows).view({requests, rows});
  // Row j: the tail's token j, then draft j - tail, then pads (the last draft again) at the
  // last position, whose cache rows come after every real row.
  const torch::Tensor steps = torch::arange(rows, long_options).unsqueeze(0);
  const torch::Tensor from_drafts =
      draft_ids.gather(1, (steps - tail_lengths).clamp(0, drafts - 1));
  const torch::Tensor ids_per_request = torch::where(steps < tail_lengths, tails, from_drafts);
  // The same ids in both streams of a request (expanded: see row_graphs.cc).
  const torch::Tensor ids =
      ids_per_request.unsqueeze(1).expand({requests, 2, rows}).reshape({streams, rows});
  const torch::Tensor columns = torch::arange(span, long_options);
  PoolGraphs::Inputs in;
  in.inputs = {model_.embed(ids)};
  in.positions = torch::minimum(first_positions.unsqueeze(1) + steps, last_positions.unsqueeze(1));
  in.rows = lengths.unsqueeze(1) + steps;
  in.mask = columns.view({1, 1, span}) <= in.rows.unsqueeze(2);
  in.span = span;
  const torch::Tensor logits = model_.forward(*e.view, in)[1].to(torch::kFloat32);
  // Draft i's logits: row tail - 1 + i of the forward, or, for an empty tail, the prefill's
  // (row 0 of `all`, before the forward's rows).
  const torch::Tensor all = torch::cat({e.first.unsqueeze(1), logits}, 1);
  const torch::Tensor stream_tails =
      tail_lengths.unsqueeze(1).expand({requests, 2, 1}).reshape({streams, 1});
  const torch::Tensor index = stream_tails + torch::arange(drafts, long_options).unsqueeze(0);
  const torch::Tensor picked = all.gather(1, index.unsqueeze(2).expand({streams, drafts, vocab}))
                                   .view({requests, 2, drafts, vocab});
  // p as DecodeSession::Probabilities makes it: MixCfg, tempering, softmax; one-hot greedy.
  const torch::Tensor cfg = params.select(0, 0).to(torch::kFloat32).view({requests, 1, 1});
  const torch::Tensor temperature = params.select(0, 1).to(torch::kFloat32).view({requests, 1, 1});
  const torch::Tensor tau = params.select(0, 2).view({requests, 1});
  RowFilters filters;
  if (filtered) {
    filters = {e.ints.narrow(0, tails_at - 2 * requests, requests).view({requests, 1, 1}),
               params.select(0, 3).to(torch::kFloat32).view({requests, 1, 1})};
  }
  const torch::Tensor p =
      GuidedProbabilities(picked.select(1, 0), picked.select(1, 1), cfg, temperature,
                          /*one_hot_greedy=*/true, filtered ? &filters : nullptr);
  // (4) Every draft's pooled and own mass (row-wise, so all requests at once), kept where the
  // pooled mass, as float32, reaches tau (PooledThresholdVerifier::Kept).
  const torch::Tensor p_rows = p.reshape({requests * drafts, vocab});
  const PooledProbabilities pooled =
      Pool(p_rows, draft_ids.reshape({-1}), *neighbors_, shape_.pooling);
  const torch::Tensor pooled_mass = pooled.pooled.to(torch::kFloat64).view({requests, drafts});
  const torch::Tensor own_mass = pooled.own.to(torch::kFloat64).view({requests, drafts});
  const torch::Tensor rejected = (pooled_mass >= tau).logical_not();
  // (5) The local expansion, request by request (a step's drafts start a row of the grid).
  std::vector<torch::Tensor> expanded;
  for (int64_t r = 0; r < requests; ++r) {
    expanded.push_back(ExpandRejectionsOnDevice(rejected.select(0, r), /*begin=*/0, shape_.grid,
                                                shape_.radius, shape_.rejection));
  }
  const torch::Tensor resampled = torch::stack(expanded);  // bool [requests, drafts]
  // (6) The k-th re-sampled position draws with the target stream's k-th number.
  const torch::Tensor rank = (resampled.to(torch::kInt64).cumsum(1) - 1).clamp_min(0);
  const torch::Tensor numbers = e.numbers.gather(1, rank).reshape({-1});
  const torch::Tensor drawn = DrawRows(p_rows, numbers).view({requests, drafts});
  const torch::Tensor tokens = torch::where(resampled, drawn, draft_ids);
  std::vector<torch::Tensor> result = {draft_ids, pooled_mass.view(torch::kInt64),
                                       own_mass.view(torch::kInt64),
                                       resampled.to(torch::kInt64), tokens};
  if (shape_.carried > 0) result.push_back(carried_ids);
  e.result = torch::cat(result, 1);
}

Status MuloVerifyGraphs::CaptureKey(const Key& key) {
  // Plain variables (not a structured binding): the lambdas below capture them, which C++17
  // does not allow of bindings (clang refuses it).
  const int64_t streams = std::get<0>(key), rows = std::get<1>(key), last = std::get<2>(key);
  const bool filtered = std::get<3>(key);
  return GuardTorch("MuloVerifyGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
    const torch::Device device = model_.options.device();
    const int64_t requests = streams / 2, drafts = shape_.drafts;
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    const auto long_options = torch::dtype(torch::kInt64).device(device);
    std::unique_ptr<Inputs>& inputs = inputs_[{streams, rows}];
    int64_t static_bytes = 0;
    if (inputs == nullptr) {
      inputs = std::make_unique<Inputs>();
      // Until the first call fills them: every request a pad (the scratch slot, length 0,
      // greedy, a tail of one token 0), so the captures' warm-ups write nowhere a request
      // reads.
      inputs->ints = torch::zeros({IntsSize(streams, rows)}, long_options);
      inputs->ints.narrow(0, 0, streams).fill_(pool_.scratch_slot());
      inputs->ints.narrow(0, kStreamFields * streams + (kRequestParams + 1) * requests, requests)
          .fill_(1);
      inputs->drafts = torch::zeros({requests, drafts}, long_options);
      inputs->numbers = torch::zeros({requests, drafts}, torch::dtype(torch::kFloat64).device(device));
      inputs->carried = torch::zeros({requests, shape_.carried}, long_options);
      inputs->first = torch::zeros({streams, model_.vocab},
                                   torch::dtype(torch::kFloat32).device(device));
      static_bytes = (inputs->ints.numel() + inputs->drafts.numel() +
                               inputs->numbers.numel() + inputs->carried.numel()) * 8 +
                              inputs->first.numel() * 4;
      if (drafting_) {
        // U_r's prefix grids and rows' firsts (and the drafter's fields: step graphs).
        inputs->drafter_ints = torch::zeros({DrafterIntsSize(streams, drafting_->grid)}, long_options);
        static_bytes += inputs->drafter_ints.numel() * 8;
      }
      if (shape_.draft) {
        // Pads draw greedily from zero logits into the drafter's scratch slot.
        inputs->drafter_ints.narrow(0, 0, streams).fill_(drafting_->pool->scratch_slot());
        inputs->drafter_first = torch::zeros({streams, drafting_->model.vocab},
                                             torch::dtype(torch::kFloat32).device(device));
        inputs->drafter_numbers = torch::zeros({requests, shape_.carried},
                                               torch::dtype(torch::kFloat64).device(device));
        static_bytes += inputs->drafter_numbers.numel() * 8 + inputs->drafter_first.numel() * 4;
      }
    }
    e->ints = inputs->ints;
    e->drafts = inputs->drafts;
    e->numbers = inputs->numbers;
    e->carried = inputs->carried;
    e->first = inputs->first;
    e->view.emplace(pool_.SlotIndexedView(e->ints.narrow(0, 0, streams)));
    e->drafter_ints = inputs->drafter_ints;
    if (shape_.draft) {
      e->drafter_first = inputs->drafter_first;
      e->drafter_numbers = inputs->drafter_numbers;
      e->drafter_view.emplace(
          drafting_->pool->SlotIndexedView(e->drafter_ints.narrow(0, 0, streams)));
    }
    auto run = [this, e, streams, rows, last, filtered] {
      Body(*e, streams, rows, last, filtered);
    };
    e->graph = set_.Make(device, run, model_.emulated, static_bytes);
    if (e->graph != nullptr) entries_[key] = std::move(entry);
    return OkStatus();
  });
}

bool MuloVerifyGraphs::Fits(const KvCache& cache, int64_t cached, int64_t tail,
                            const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  const bool filtered = HasFilters(sampling, model_.vocab);
  if (filtered && !shape_.filters) return false;
  if (tail < 0 || tail > shape_.drafts || cached > cache.length()) return false;
  const int64_t rows = RowsOf(tail);
  if (drafting_) {
    // Every height of a row was captured; a request of this pool fits its height's span
    // (StepSpan bounds its rows by the pool's longest condition), the drafter's FitsDrafter.
    return cached + rows <= pool_.slot_rows() &&
           entries_.count(Key(2, rows, shape_.carried / drafting_->grid, filtered)) > 0;
  }
  const int64_t span = ForwardGraphs::RoundUpToSpan(cached + rows);
  return span <= pool_.slot_rows() && entries_.count(Key(2, rows, span, filtered)) > 0;
}

bool MuloVerifyGraphs::FitsDrafter(const KvCache& cache, int64_t prefix,
                                   const SamplingParams& sampling) const {
  if (!shape_.draft || cache.pool() != drafting_->pool || cache.batch() != 2) return false;
  if (HasFilters(sampling, drafting_->model.vocab) && !shape_.filters) return false;
  const int64_t grid = drafting_->grid;
  return prefix >= 0 && prefix % grid == 0 && prefix + shape_.carried <= grid * grid &&
         cache.length() + shape_.carried <= DrafterSpan((prefix + shape_.carried) / grid);
}

Status MuloVerifyGraphs::CheckCall(const Call& call) const {
  const int64_t tail = static_cast<int64_t>(call.tail.size());
  const int64_t drafts = shape_.drafts, carried = shape_.carried;
  if (call.cache == nullptr || !Fits(*call.cache, call.cache->length(), tail, call.sampling)) {
    return InvalidArgumentError("MuloVerifyGraphs::Run: a call does not fit the graphs");
  }
  if ((call.redraw_uniforms.defined() && call.redraw_uniforms.numel() != drafts) ||
      (tail == 0 &&
       (!call.first_logits.defined() || call.first_logits.numel() != 2 * model_.vocab))) {
    return InvalidArgumentError("MuloVerifyGraphs::Run: a call needs " + std::to_string(drafts) +
                                " numbers and, with an empty tail, the first logits");
  }
  if (shape_.upsample) {
    const int64_t prefix = static_cast<int64_t>(call.drafter.prefix.size());
    const int64_t grid = drafting_->grid;
    if (!call.carried.defined() || call.carried.numel() != carried || prefix % grid != 0 ||
        prefix + carried > grid * grid) {
      return InvalidArgumentError("MuloVerifyGraphs::Run: a call of graphs that up-sample needs " +
                                  std::to_string(carried) +
                                  " carried ids after whole drafter prefix rows");
    }
    return OkStatus();
  }
  if (!shape_.draft) {
    if (!call.drafts.defined() || call.drafts.numel() != drafts ||
        (carried > 0 && (!call.carried.defined() || call.carried.numel() != carried))) {
      return InvalidArgumentError("MuloVerifyGraphs::Run: a call needs " +
                                  std::to_string(drafts) + " drafts and " +
                                  std::to_string(carried) + " carried ids");
    }
    return OkStatus();
  }
  const DrafterRow& row = call.drafter;
  if (row.cache == nullptr ||
      !FitsDrafter(*row.cache, static_cast<int64_t>(row.prefix.size()), row.sampling) ||
      !row.logits.defined() || row.logits.numel() != 2 * drafting_->model.vocab ||
      (row.uniforms.defined() && row.uniforms.numel() != carried)) {
    return InvalidArgumentError("MuloVerifyGraphs::Run: a step graph's call needs the "
                                "drafter's cache, logits, whole prefix rows and " +
                                std::to_string(carried) + " numbers");
  }
  return OkStatus();
}

void MuloVerifyGraphs::UploadCalls(Entry& e, const std::vector<Call>& calls) const {
  const int64_t drafts = shape_.drafts, carried = shape_.carried;
  const bool whole = calls.size() == 1;  // a lone request fills the buffers without views
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& call = calls[i];
    const int64_t at = static_cast<int64_t>(i);
    const auto row = [&](const torch::Tensor& t) { return whole ? t : t.narrow(0, at, 1); };
    const auto pair = [&](const torch::Tensor& t) { return whole ? t : t.narrow(0, 2 * at, 2); };
    // Greedy: p is one-hot, which every number in [0, 1) draws the same from.
    if (call.redraw_uniforms.defined()) {
      row(e.numbers).copy_(call.redraw_uniforms);  // [drafts] broadcast to [1, drafts]
    }
    if (call.tail.empty()) pair(e.first).copy_(call.first_logits.view({2, model_.vocab}));
    if (shape_.draft) {
      pair(e.drafter_first).copy_(call.drafter.logits.view({2, drafting_->model.vocab}));
      // A greedy drafter's numbers are never read (its draw is the argmax).
      if (call.drafter.uniforms.defined()) {
        row(e.drafter_numbers).copy_(call.drafter.uniforms.view({1, carried}));
      }
      continue;
    }
    if (!shape_.upsample) row(e.drafts).copy_(call.drafts.view({1, drafts}));
    if (carried > 0) row(e.carried).copy_(call.carried);  // [carried] to [1, carried]
  }
}

StatusOr<std::vector<MuloVerifyGraphs::Output>> MuloVerifyGraphs::Run(
    const std::vector<Call>& calls) const {
  const int64_t drafts = shape_.drafts, carried = shape_.carried;
  int64_t longest = 0, rows = 0, height = 0, drafter_longest = 0;
  for (const Call& call : calls) {
    MULO_RETURN_IF_ERROR(CheckCall(call));
    rows = std::max(rows, RowsOf(static_cast<int64_t>(call.tail.size())));
    if (drafting_) {
      height = std::max(height, (static_cast<int64_t>(call.drafter.prefix.size()) + carried) /
                                    drafting_->grid);
      if (shape_.draft) {
        drafter_longest = std::max(drafter_longest, call.drafter.cache->length() + carried);
      }
    }
    longest = std::max(longest, call.cache->length() + rows);
  }
  const int64_t streams = PoolGraphs::Bucket(2 * static_cast<int64_t>(calls.size()));
  const int64_t span = ForwardGraphs::RoundUpToSpan(longest);
  // Step graphs are keyed by U_r's height instead, whose spans hold every request that fits
  // the pools' conditions (else each call alone, as a key not captured).
  const bool filtered =
      AnyFilters(calls, model_.vocab, drafting_ ? drafting_->model.vocab : model_.vocab);
  auto it = entries_.find(Key(streams, rows, drafting_ ? height : span, filtered));
  if (drafting_ && it != entries_.end() &&
      (longest > StepSpan(height) || (shape_.draft && drafter_longest > DrafterSpan(height)))) {
    it = entries_.end();
  }
  if (it == entries_.end() && calls.size() > 1) {
    // A batch whose key failed to capture: each call alone (Fits holds the lone key).
    return RunEachAlone<Output>(calls, [this](const std::vector<Call>& one) { return Run(one); });
  }
  if (it == entries_.end()) {
    return FailedPreconditionError(
        "MuloVerifyGraphs::Run: no graph of " + std::to_string(streams) + " streams, " +
        std::to_string(rows) + " rows, " +
        (drafting_ ? "height " + std::to_string(height) : "span " + std::to_string(span)));
  }
  Entry* e = it->second.get();
  const int64_t requests = streams / 2;
  return GuardTorch("MuloVerifyGraphs::Run", [&]() -> StatusOr<std::vector<Output>> {
    at::NoGradGuard no_grad;
    std::vector<int64_t> ints = StepInts(calls, streams, rows, pool_.scratch_slot());
    UploadInto(e->ints,
               torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())}, torch::kInt64));
    if (drafting_) {
      std::vector<int64_t> drafter = DrafterInts(
          calls, streams, drafting_->grid, shape_.draft ? drafting_->pool->scratch_slot() : 0);
      UploadInto(e->drafter_ints, torch::from_blob(drafter.data(),
                                                   {static_cast<int64_t>(drafter.size())},
                                                   torch::kInt64));
    }
    UploadCalls(*e, calls);
    e->graph->Replay();
    set_.CountReplay(static_cast<int64_t>(calls.size()));
    // Every request's decisions in one read (pads' rows included: no view).
    const torch::Tensor result = HostRead(e->result);
    const int64_t width = result.size(1);
    std::vector<Output> outputs;
    for (size_t i = 0; i < calls.size(); ++i) {
      outputs.push_back(ReadOutput(result.data_ptr<int64_t>() + static_cast<int64_t>(i) * width,
                                   drafts, width));
      calls[i].cache->Advance(static_cast<int64_t>(calls[i].tail.size()) + drafts);
      if (shape_.draft) {
        // A copy: the next replay rewrites the graph's outputs.
        const int64_t at = static_cast<int64_t>(i);
        outputs.back().drafter_logits =
            (requests == 1 ? e->drafter_logits : e->drafter_logits.narrow(0, 2 * at, 2)).clone();
        calls[i].drafter.cache->Advance(carried);
      }
    }
    return outputs;
  });
}

}  // namespace mulo::engine
