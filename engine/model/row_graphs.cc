#include "engine/model/row_graphs.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/kernels/fused_ops.h"
#include "engine/model/cuda_graph_capture.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"
#include "engine/model/stream_fields.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

struct RowGraphs::MemoryPool {
  GraphMemoryPool memory;  // every key's graph allocates from it (one worker replays them)
};

namespace {

// The ints' columns per stream: slot, cache length before the replay, the sequence position of
// the first token fed, the last position fed, the prefix's length (drafts; 1 otherwise).
constexpr int64_t kStreamFields = 5;
// Per request: cfg_scale and temperature (float64 bits), its prefix (kMaxPrefix tokens), top_k,
// top_p (float64 bits).
constexpr int64_t kRequestFields = 2 + RowGraphs::kMaxPrefix + 2;

bool AnyFilters(const std::vector<RowGraphs::Call>& calls, int64_t vocab) {
  return std::any_of(calls.begin(), calls.end(), [vocab](const RowGraphs::Call& call) {
    return HasFilters(call.sampling, vocab);
  });
}

// The replay's ints (Entry's layout) for `calls`, in plain host memory; pad requests keep the
// scratch slot, length 0 and greedy (cfg_scale and temperature 0.0, all bits zero; their
// filters' draws are discarded).
std::vector<int64_t> RowInts(const std::vector<RowGraphs::Call>& calls, int64_t streams,
                             int64_t scratch_slot) {
  constexpr int64_t kMaxPrefix = RowGraphs::kMaxPrefix;
  const int64_t requests = streams / 2;
  std::vector<int64_t> ints(kStreamFields * streams + kRequestFields * requests, 0);
  double* const params = reinterpret_cast<double*>(ints.data() + kStreamFields * streams);
  static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
  int64_t* const prefixes = ints.data() + kStreamFields * streams + 2 * requests;
  int64_t* const top_k = prefixes + kMaxPrefix * requests;
  double* const top_p = reinterpret_cast<double*>(top_k + requests);
  for (int64_t s = 0; s < streams; ++s) {
    ints[s] = scratch_slot;
    ints[4 * streams + s] = 1;
  }
  for (size_t r = 0; r < calls.size(); ++r) {
    const RowGraphs::Call& call = calls[r];
    const int64_t at = static_cast<int64_t>(r);
    PutStreamFields(*call.cache, call.first_position, call.last_position, at, streams,
                    ints.data());
    if (!call.prefix.empty()) {
      std::fill_n(ints.begin() + 4 * streams + 2 * at, 2, static_cast<int64_t>(call.prefix.size()));
    }
    std::copy(call.prefix.begin(), call.prefix.end(), prefixes + r * kMaxPrefix);
    params[r] = call.sampling.cfg_scale;
    params[requests + r] = call.sampling.temperature;
    top_k[r] = call.sampling.top_k;
    top_p[r] = call.sampling.top_p;
  }
  return ints;
}

}  // namespace

struct RowGraphs::Entry {
  // Static inputs on the device, each filled by one copy per replay (a lone request's with
  // no view made: every operator outside the graph counts on a GPU):
  //   ints [kStreamFields x streams + kRequestFields x requests] int64: every stream's
  //     fields (above), column by column; then every request's cfg_scale and temperature
  //     (0: greedy) as float64 bits; then every request's prefix, padded with token 0; then
  //     every request's top_k, and its top_p as float64 bits (read by filtered keys only);
  //   uniforms [requests x tokens] float64: request r's step j number at r x tokens + j;
  //   logits [streams, vocab] float32: what the row's first token is drawn from.
  torch::Tensor ints, uniforms, logits;
  std::optional<KvCache> view;  // the pool's slots as the ints' slot column indexes them
  torch::Tensor tokens;         // [requests, tokens] int64, written by every replay
  torch::Tensor last_logits;    // [streams, vocab] float32, written by every replay (rows)
  torch::Tensor probabilities;  // [requests, tokens, vocab] float32, every replay (drafts)
  std::unique_ptr<ReplayableGraph> graph;
};

RowGraphs::RowGraphs(const KvPool& pool, Shape shape, Model model)
    : pool_(pool),
      shape_(shape),
      tokens_(shape.tokens),
      model_(std::move(model)),
      memory_pool_(std::make_unique<MemoryPool>()) {}

RowGraphs::~RowGraphs() = default;

PoolGraphs::Counts RowGraphs::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

RowGraphs* RowGraphs::Of(const KvCache& cache) {
  return cache.pool() != nullptr ? cache.pool()->row_graphs() : nullptr;
}

StatusOr<std::shared_ptr<RowGraphs>> RowGraphs::Capture(const KvPool& pool, Shape shape,
                                                        Model model) {
  if (pool.scratch_slot() < 0) {
    return InvalidArgumentError("RowGraphs: the pool needs a scratch slot for pad requests");
  }
  if (shape.tokens < 1) return InvalidArgumentError("RowGraphs: a row needs at least one token");
  std::shared_ptr<RowGraphs> graphs(new RowGraphs(pool, shape, std::move(model)));
  const auto start = std::chrono::steady_clock::now();
  const torch::Device device = graphs->model_.options.device();
  const int64_t reserved_before = DeviceReservedBytes(device);
  // Two streams per request; the requests of a batch fill the pool's slots at most.
  for (const bool filtered : {false, true}) {
    if (filtered && !shape.filters) break;
    for (int64_t streams = 2; streams <= PoolGraphs::Bucket(pool.slots()); streams *= 2) {
      for (int64_t span = ForwardGraphs::kSpanRows; span <= pool.slot_rows();
           span += ForwardGraphs::kSpanRows) {
        if (span < graphs->rows_written()) continue;
        MULO_RETURN_IF_ERROR(graphs->CaptureKey(Key(streams, span, filtered)));
      }
    }
  }
  PoolGraphs::Counts& counts = graphs->counts_;
  counts.capture_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  counts.memory_bytes += DeviceReservedBytes(device) - reserved_before;
  return graphs;
}

void RowGraphs::Body(Entry& e, const Key& key) const {
  at::NoGradGuard no_grad;
  const auto [streams, span, filtered] = key;
  const int64_t requests = streams / 2;
  const torch::Device device = model_.options.device();
  torch::Tensor lengths = e.ints.narrow(0, streams, streams);
  torch::Tensor first_positions = e.ints.narrow(0, 2 * streams, streams);
  const torch::Tensor last_positions = e.ints.narrow(0, 3 * streams, streams);
  const torch::Tensor columns = torch::arange(span, torch::dtype(torch::kInt64).device(device));
  const torch::Tensor params = e.ints.narrow(0, kStreamFields * streams, 2 * requests)
                                   .view(torch::kFloat64)
                                   .view({2, requests});
  const torch::Tensor cfg = params.select(0, 0).to(torch::kFloat32).unsqueeze(1);
  const torch::Tensor temperature = params.select(0, 1).to(torch::kFloat32);
  const torch::Tensor uniforms = e.uniforms.view({requests, tokens_});
  torch::Tensor logits = e.logits;
  if (shape_.drafts) {
    // The prefix: both streams of a request feed its tokens at rows length .. length + 1 (a
    // one-token prefix's pad row is overwritten by the first draft, or lies past the cache's
    // length), and the first draft is drawn from its last real row.
    const torch::Tensor counts = e.ints.narrow(0, 4 * streams, streams);
    const torch::Tensor ids = e.ints.narrow(0, kStreamFields * streams + 2 * requests,
                                            kMaxPrefix * requests)
                                  .view({requests, 1, kMaxPrefix})
                                  .expand({requests, 2, kMaxPrefix})
                                  .reshape({streams, kMaxPrefix});
    const torch::Tensor steps =
        torch::arange(kMaxPrefix, torch::dtype(torch::kInt64).device(device)).unsqueeze(0);
    PoolGraphs::Inputs in;
    in.inputs = {model_.embed(ids)};
    in.positions = torch::minimum(first_positions.unsqueeze(1) + steps, last_positions.unsqueeze(1));
    in.rows = lengths.unsqueeze(1) + steps;
    in.mask = columns.view({1, 1, span}) <= in.rows.unsqueeze(2);
    in.span = span;
    const torch::Tensor out = model_.forward(*e.view, in)[1];
    logits = out.gather(1, (counts - 1).view({streams, 1, 1}).expand({streams, 1, model_.vocab}))
                 .squeeze(1)
                 .to(torch::kFloat32);
    lengths = lengths + counts;
    first_positions = first_positions + counts;
  }
  StepsIn steps;
  steps.logits = logits;
  steps.cfg = cfg;
  steps.temperature = temperature;
  steps.uniforms = uniforms;
  steps.lengths = lengths;
  steps.first_positions = first_positions;
  steps.last_positions = last_positions;
  steps.span = span;
  steps.tokens = tokens_;
  steps.drafts = shape_.drafts;
  if (filtered) {
    const torch::Tensor filters =
        e.ints.narrow(0, kStreamFields * streams + (2 + kMaxPrefix) * requests, 2 * requests);
    steps.filters = {filters.narrow(0, 0, requests).view({requests, 1}),
                     filters.narrow(0, requests, requests)
                         .view(torch::kFloat64)
                         .to(torch::kFloat32)
                         .view({requests, 1})};
  }
  Steps out = DrawSteps(model_, *e.view, steps);
  e.tokens = out.tokens;
  e.probabilities = out.probabilities;
  e.last_logits = out.logits;
}

RowGraphs::Steps RowGraphs::DrawSteps(const Model& model, KvCache& view, const StepsIn& in) {
  const int64_t requests = in.cfg.size(0), streams = 2 * requests;
  const torch::Tensor columns =
      torch::arange(in.span, torch::dtype(torch::kInt64).device(in.lengths.device()));
  const torch::Tensor greedy = in.temperature == 0;
  // Greedy requests divide by 1 (their tempered draw is computed and discarded).
  const torch::Tensor divisor =
      torch::where(greedy, torch::ones_like(in.temperature), in.temperature).unsqueeze(1);
  torch::Tensor logits = in.logits;
  std::vector<torch::Tensor> drawn, probabilities;
  for (int64_t j = 0; j < in.tokens; ++j) {
    // MixCfg per request: uncond + scale x (cond - uncond), the conditional stream first.
    const torch::Tensor pairs = logits.reshape({requests, 2, -1});
    const torch::Tensor cond = pairs.select(1, 0), uncond = pairs.select(1, 1);
    torch::Tensor token, probs, best;
    if (model.fused_draw && !in.drafts && !in.filters.top_k.defined()) {
      // The combine, the temperature, the softmax and the draw: one kernel (a dozen ops).
      token = GuidedDraw(cond, uncond, in.cfg.reshape({-1}).contiguous(),
                         in.temperature.reshape({-1}).contiguous(),
                         in.uniforms.select(1, j).contiguous());
    } else {
      const torch::Tensor guided = uncond + in.cfg * (cond - uncond);
      const torch::Tensor tempered = guided / divisor;
      probs = torch::softmax(
          in.filters.top_k.defined() ? FilterRows(tempered, in.filters) : tempered, -1);
      best = guided.argmax(-1);
      token = torch::where(greedy, best, DrawRows(probs, in.uniforms.select(1, j)));
    }
    drawn.push_back(token);
    if (in.drafts) {
      // What the verifier judges the draft by: ToProbabilities' one-hot at temperature 0.
      const torch::Tensor one_hot = torch::zeros_like(probs).scatter_(1, best.unsqueeze(1), 1.0);
      probabilities.push_back(torch::where(greedy.unsqueeze(1), one_hot, probs));
      if (j + 1 == in.tokens) break;  // the last draft is fed after verification, if kept
    }
    // Both streams of a request read its token (expanded, not repeat_interleave: that one
    // reads its output size back from the device, which a capture forbids).
    const torch::Tensor ids = token.unsqueeze(1).expand({requests, 2}).reshape({streams, 1});
    PoolGraphs::Inputs fed;
    fed.inputs = {model.embed(ids)};
    fed.positions = torch::minimum(in.first_positions + j, in.last_positions).unsqueeze(1);
    fed.rows = (in.lengths + j).unsqueeze(1);
    fed.mask = (columns.unsqueeze(0) <= (in.lengths + j).unsqueeze(1)).unsqueeze(1);
    fed.span = in.span;
    const std::vector<torch::Tensor> out = model.forward(view, fed);
    logits = out[1].select(1, 0).to(torch::kFloat32);
  }
  Steps out;
  out.tokens = torch::stack(drawn, 1);
  if (in.drafts) {
    out.probabilities = torch::stack(probabilities, 1);
  } else {
    out.logits = logits;
  }
  return out;
}

Status RowGraphs::CaptureKey(const Key& key) {
  const int64_t streams = std::get<0>(key);
  return GuardTorch("RowGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
    const torch::Device device = model_.options.device();
    const int64_t requests = streams / 2;
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    const auto long_options = torch::dtype(torch::kInt64).device(device);
    const auto double_options = torch::dtype(torch::kFloat64).device(device);
    // Until the first call fills them: every request a pad (the scratch slot, length 0,
    // greedy), so the capture's warm-up writes nowhere a request reads.
    // (prefix length 1, so that the prefix's last row is row 0).
    e->ints = torch::cat({torch::full({streams}, pool_.scratch_slot(), long_options),
                          torch::zeros({3 * streams}, long_options),
                          torch::ones({streams}, long_options),
                          torch::zeros({kRequestFields * requests}, long_options)});
    e->uniforms = torch::zeros({requests * tokens_}, double_options);
    e->logits = torch::zeros({streams, model_.vocab}, torch::dtype(torch::kFloat32).device(device));
    e->view.emplace(pool_.SlotIndexedView(e->ints.narrow(0, 0, streams)));
    auto run = [this, e, key] { Body(*e, key); };
    auto graph = ReplayableGraph::Make(device, run, model_.emulated, memory_pool_->memory);
    if (!graph.ok()) {
      ++counts_.failed_captures;
      return OkStatus();
    }
    e->graph = std::move(*graph);
    counts_.memory_bytes += (e->ints.numel() + e->uniforms.numel()) * 8 +
                            e->logits.numel() * 4;
    ++counts_.graphs;
    entries_[key] = std::move(entry);
    return OkStatus();
  });
}

bool RowGraphs::Fits(const KvCache& cache, const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  const bool filtered = HasFilters(sampling, model_.vocab);
  if (filtered && !shape_.filters) return false;
  const int64_t span = ForwardGraphs::RoundUpToSpan(cache.length() + rows_written());
  return span <= pool_.slot_rows() && entries_.count(Key(2, span, filtered)) > 0;
}

Status RowGraphs::CheckCall(const Call& call) const {
  if (call.cache == nullptr || !Fits(*call.cache, call.sampling)) {
    return InvalidArgumentError("RowGraphs::Run: a call does not fit the row graphs");
  }
  const int64_t prefix = static_cast<int64_t>(call.prefix.size());
  if (shape_.drafts ? prefix < 1 || prefix > kMaxPrefix : prefix != 0) {
    return InvalidArgumentError("RowGraphs::Run: a prefix of " + std::to_string(prefix) +
                                " tokens does not suit these graphs");
  }
  return OkStatus();
}

StatusOr<std::vector<RowGraphs::Output>> RowGraphs::Run(const std::vector<Call>& calls) const {
  int64_t longest = 0;
  for (const Call& call : calls) {
    MULO_RETURN_IF_ERROR(CheckCall(call));
    longest = std::max(longest, call.cache->length() + rows_written());
  }
  const int64_t streams = PoolGraphs::Bucket(2 * static_cast<int64_t>(calls.size()));
  const int64_t span = ForwardGraphs::RoundUpToSpan(longest);
  const bool filtered = AnyFilters(calls, model_.vocab);
  auto it = entries_.find(Key(streams, span, filtered));
  if (it == entries_.end() && calls.size() > 1) {
    // A batch whose key failed to capture: each call alone (Fits holds the lone key).
    return RunEachAlone<Output>(calls, [this](const std::vector<Call>& one) { return Run(one); });
  }
  if (it == entries_.end()) {
    return FailedPreconditionError("RowGraphs::Run: no graph of " + std::to_string(streams) +
                                   " streams over " + std::to_string(span) + " rows");
  }
  Entry* e = it->second.get();
  const int64_t requests = streams / 2;
  return GuardTorch("RowGraphs::Run", [&]() -> StatusOr<std::vector<Output>> {
    at::NoGradGuard no_grad;
    std::vector<int64_t> ints = RowInts(calls, streams, pool_.scratch_slot());
    UploadInto(e->ints,
               torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())}, torch::kInt64));
    const bool whole = requests == 1;  // a lone request fills the buffers without views
    for (size_t r = 0; r < calls.size(); ++r) {
      const int64_t at = static_cast<int64_t>(r);
      if (!shape_.drafts) (whole ? e->logits : e->logits.narrow(0, 2 * at, 2)).copy_(calls[r].logits);
      // A greedy request's numbers are never read (its draw is the argmax).
      if (calls[r].uniforms.defined()) {
        (whole ? e->uniforms : e->uniforms.narrow(0, at * tokens_, tokens_))
            .copy_(calls[r].uniforms);
      }
    }
    e->graph->Replay();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.replays;
      counts_.calls += static_cast<int64_t>(calls.size());
    }
    std::vector<Output> outputs;
    if (shape_.drafts) {
      // Copies (the next replay rewrites the graph's outputs), left on the device for the
      // verifier: no read.
      const torch::Tensor drafts = e->tokens.clone();
      const torch::Tensor probabilities = e->probabilities.clone();
      for (size_t r = 0; r < calls.size(); ++r) {
        const int64_t at = static_cast<int64_t>(r);
        outputs.push_back({{}, torch::Tensor(), drafts.select(0, at),
                           probabilities.select(0, at)});
        calls[r].cache->Advance(static_cast<int64_t>(calls[r].prefix.size()) + tokens_ - 1);
      }
      return outputs;
    }
    if (!shape_.read) {
      // A copy (the next replay rewrites it), left on the device: no read.
      const torch::Tensor tokens = e->tokens.clone();
      for (size_t r = 0; r < calls.size(); ++r) {
        const int64_t at = static_cast<int64_t>(r);
        outputs.push_back({{},
                           (whole ? e->last_logits : e->last_logits.narrow(0, 2 * at, 2)).clone(),
                           tokens.select(0, at), torch::Tensor()});
        calls[r].cache->Advance(tokens_);
      }
      return outputs;
    }
    // Every request's tokens in one read ([requests, tokens], pads' rows included: no view).
    const torch::Tensor ids = HostRead(e->tokens);
    const int64_t* const host = ids.data_ptr<int64_t>();
    for (size_t r = 0; r < calls.size(); ++r) {
      const int64_t at = static_cast<int64_t>(r);
      // A copy: the next replay rewrites the graph's outputs.
      outputs.push_back({std::vector<int64_t>(host + at * tokens_, host + (at + 1) * tokens_),
                         (whole ? e->last_logits : e->last_logits.narrow(0, 2 * at, 2)).clone()});
      calls[r].cache->Advance(tokens_);
    }
    return outputs;
  });
}

}  // namespace mulo::engine
