#include "engine/model/verify_graphs.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/model/cuda_graph_capture.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"
#include "engine/model/stream_fields.h"
#include "engine/sampling/chain_rejection.h"
#include "engine/sampling/maximal_coupling.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

namespace {

// The ints' columns per stream: slot, cache length before the chain, the last committed
// token's sequence position, the last position fed.
constexpr int64_t kStreamFields = 4;
// Per request: cfg_scale, temperature, GSD's probability gap and embedding distance, top_p
// (float64 bits), the last committed token, the drafts with a q, the real drafts, whether it
// pools, top_k.
constexpr int64_t kRequestParams = 5;
constexpr int64_t kRequestFields = kRequestParams + 5;
// The decisions' columns in the result: kept, next token, relaxed, neighbours.
constexpr int64_t kDecisionFields = 4;

// The replay's ints (Entry's layout) for `calls` of chains of `drafts`, in plain host memory;
// pads keep the scratch slot, length 0, greedy and token 0.
std::vector<int64_t> ChainInts(const std::vector<VerifyGraphs::Call>& calls, int64_t streams,
                               int64_t drafts, int64_t scratch_slot) {
  const int64_t requests = streams / 2;
  std::vector<int64_t> ints(kStreamFields * streams + kRequestFields * requests, 0);
  double* const params = reinterpret_cast<double*>(ints.data() + kStreamFields * streams);
  static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
  int64_t* const last_tokens = ints.data() + kStreamFields * streams + kRequestParams * requests;
  int64_t* const carried = last_tokens + requests;
  int64_t* const judged = carried + requests;
  int64_t* const grouped = judged + requests;
  int64_t* const top_k = grouped + requests;
  for (int64_t s = 0; s < streams; ++s) ints[s] = scratch_slot;
  for (size_t r = 0; r < calls.size(); ++r) {
    const VerifyGraphs::Call& call = calls[r];
    PutStreamFields(*call.cache, call.first_position, call.last_position,
                    static_cast<int64_t>(r), streams, ints.data());
    params[r] = call.sampling.cfg_scale;
    params[requests + r] = call.sampling.temperature;
    if (call.group) {
      params[2 * requests + r] = call.group->max_probability_gap;
      params[3 * requests + r] = call.group->max_embedding_distance;
    }
    params[4 * requests + r] = call.sampling.top_p;
    top_k[r] = call.sampling.top_k;
    last_tokens[r] = call.last_token;
    carried[r] = call.q.defined() ? call.q.size(0) : 0;
    judged[r] = call.judged >= 0 ? std::min(call.judged, drafts) : drafts;
    grouped[r] = call.group.has_value();
  }
  return ints;
}

// What GSD's graphs judge one request's drafts by: its groups' pooled masses when it pools
// (`pools`, bool [1]), else each draft's own (the exact rule); drafts that are not `real` (the
// window's padding) rejected with no neighbours. p and q [drafts, V], tokens [drafts].
PooledMasses JudgedMasses(const torch::Tensor& p, const torch::Tensor& q,
                          const torch::Tensor& tokens, const torch::Tensor& embeddings,
                          int64_t group_size, const torch::Tensor& gap,
                          const torch::Tensor& distance, const torch::Tensor& pools,
                          const torch::Tensor& real) {
  const PooledMasses group = GroupMasses(p, q, tokens, embeddings, group_size, gap, distance);
  const torch::Tensor x = tokens.unsqueeze(1);
  const torch::Tensor own_p = p.gather(1, x).squeeze(1).to(torch::kFloat64);
  const torch::Tensor own_q = q.gather(1, x).squeeze(1).to(torch::kFloat64);
  PooledMasses masses;
  masses.p = torch::where(real, torch::where(pools, group.p, own_p), 0.0);
  masses.q = torch::where(real, torch::where(pools, group.q, own_q), 1.0);
  masses.neighbors = torch::where(real.logical_and(pools), group.neighbors, 0);
  return masses;
}

// MC-SJD's re-draws of a window: rows marked `coupled` hold drafts (x_i from q_i) the
// verification did not reach, coupled with p_i (row i's keep test takes the acceptance number
// i: the verification took the earlier ones); the other rows draw from p with `numbers`, as
// SJD's. p [requests, drafts + 1, V], q and drafts [requests, drafts, ...], accept [requests,
// drafts], numbers [requests x (drafts + 1)], coupled bool [requests, drafts + 1].
torch::Tensor CoupledRedraws(const torch::Tensor& p, const torch::Tensor& q,
                             const torch::Tensor& drafts, const torch::Tensor& accept,
                             const torch::Tensor& numbers, const torch::Tensor& coupled) {
  const int64_t requests = p.size(0), rows = p.size(1), vocab = p.size(2);
  const torch::Tensor p_rows = p.reshape({requests * rows, vocab});
  const torch::Tensor x =
      torch::cat({drafts, torch::zeros({requests, 1}, drafts.options())}, 1).reshape({-1});
  const torch::Tensor q_rows =
      torch::cat({q, p.narrow(1, rows - 1, 1)}, 1).reshape({requests * rows, vocab});
  const torch::Tensor keep_numbers =
      torch::cat({accept, torch::zeros({requests, 1}, accept.options())}, 1).reshape({-1});
  return CoupleRows(p_rows, x, KeepProbabilities(p_rows, q_rows, x), ResidualRows(p_rows, q_rows),
                    keep_numbers, numbers, coupled.reshape({-1}))
      .tokens;
}

// The rows after the kept drafts, re-drawn: row i takes the number i - (kept + 1), the host's
// draw of rows kept + 1 .. from the drafter stream's next numbers (earlier rows' draws are
// discarded); argmax when greedy, which a one-hot p gives too. Coupled (MC-SJD) rows keep the
// draft where the maximal coupling lets them. [requests, rows].
torch::Tensor RedrawRows(bool couple, const torch::Tensor& p, const torch::Tensor& q,
                         const torch::Tensor& drafts, const torch::Tensor& accept,
                         const torch::Tensor& redraw_numbers, const torch::Tensor& steps,
                         const torch::Tensor& decisions, const torch::Tensor& judged) {
  const int64_t requests = p.size(0), rows = p.size(1), vocab = p.size(2);
  const torch::Tensor first = decisions.select(1, 0).unsqueeze(1) + 1;
  const torch::Tensor index = (steps - first).clamp_min(0);
  const torch::Tensor numbers = redraw_numbers.gather(1, index).reshape({-1});
  const torch::Tensor redraws =
      couple ? CoupledRedraws(p, q, drafts, accept, numbers,
                              steps.ge(first).logical_and(steps.lt(judged.unsqueeze(1))))
             : DrawRows(p.reshape({requests * rows, vocab}), numbers);
  return redraws.view({requests, rows});
}

}  // namespace

struct VerifyGraphs::MemoryPool {
  GraphMemoryPool memory;  // every key's graph allocates from it (one worker replays them)
};

struct VerifyGraphs::Inputs {
  torch::Tensor ints, drafts, q, accept, draw, redraw;  // as Entry's
};

struct VerifyGraphs::Entry {
  // Static inputs on the device, each filled by one copy per replay:
  //   ints [kStreamFields x streams + kRequestFields x requests] int64: every stream's fields
  //     (above), column by column; every request's fields (above), column by column;
  //   drafts [requests, drafts] int64, q [requests, drafts, vocab] float32;
  //   accept [requests, drafts] and draw [requests] float64: the rule's numbers;
  //   redraw [requests, drafts + 1] float64: the re-draws' numbers (Shape::redraw).
  torch::Tensor ints, drafts, q, accept, draw, redraw;
  std::optional<KvCache> view;  // the pool's slots as the ints' slot column indexes them
  // [requests, drafts + kDecisionFields (+ drafts + 1 with redraw) (+ drafts with groups)]
  // int64, written by every replay: the drafts, the decisions (the re-draws, the relaxed
  // flags): the one read.
  torch::Tensor result;
  torch::Tensor p;  // [requests, drafts + 1, vocab] float32, every replay (Shape::redraw)
  std::unique_ptr<ReplayableGraph> graph;
};

VerifyGraphs::VerifyGraphs(const KvPool& pool, Shape shape, RowGraphs::Model model,
                           torch::Tensor embeddings)
    : pool_(pool),
      shape_(shape),
      drafts_(shape.drafts),
      model_(std::move(model)),
      embeddings_(std::move(embeddings)),
      memory_pool_(std::make_unique<MemoryPool>()) {}

VerifyGraphs::~VerifyGraphs() = default;

PoolGraphs::Counts VerifyGraphs::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

VerifyGraphs* VerifyGraphs::Of(const KvCache& cache, const Shape& shape) {
  if (cache.pool() == nullptr) return nullptr;
  for (const std::shared_ptr<VerifyGraphs>& graphs : cache.pool()->verify_graphs()) {
    if (graphs->drafts() == shape.drafts && graphs->shape().redraw == shape.redraw &&
        graphs->shape().group_size == shape.group_size &&
        graphs->shape().couple == shape.couple) {
      return graphs.get();
    }
  }
  return nullptr;
}

StatusOr<std::shared_ptr<VerifyGraphs>> VerifyGraphs::Capture(const KvPool& pool, Shape shape,
                                                              RowGraphs::Model model,
                                                              const torch::Tensor& embeddings) {
  if (pool.scratch_slot() < 0) {
    return InvalidArgumentError("VerifyGraphs: the pool needs a scratch slot for pad requests");
  }
  if (shape.drafts < 1) {
    return InvalidArgumentError("VerifyGraphs: a chain needs at least one draft");
  }
  if (shape.group_size > 1 && (!embeddings.defined() || embeddings.dim() != 2 ||
                               embeddings.size(0) != model.vocab)) {
    return InvalidArgumentError("VerifyGraphs: a group size needs the [" +
                                std::to_string(model.vocab) + ", dim] token embeddings");
  }
  const int64_t drafts = shape.drafts;
  torch::Tensor table;
  if (shape.group_size > 1) {
    MULO_ASSIGN_OR_RETURN(table, GuardTorch("VerifyGraphs::Capture", [&]() -> StatusOr<torch::Tensor> {
      at::NoGradGuard no_grad;
      return embeddings.to(model.options.device(), torch::kFloat32).contiguous();
    }));
  }
  std::shared_ptr<VerifyGraphs> graphs(
      new VerifyGraphs(pool, shape, std::move(model), std::move(table)));
  const auto start = std::chrono::steady_clock::now();
  const torch::Device device = graphs->model_.options.device();
  const int64_t reserved_before = DeviceReservedBytes(device);
  for (const bool filtered : {false, true}) {
    if (filtered && !shape.filters) break;
    for (int64_t streams = 2; streams <= PoolGraphs::Bucket(pool.slots()); streams *= 2) {
      for (int64_t span = ForwardGraphs::kSpanRows; span <= pool.slot_rows();
           span += ForwardGraphs::kSpanRows) {
        if (span < drafts + 1) continue;
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

void VerifyGraphs::Body(Entry& e, const Key& key) const {
  at::NoGradGuard no_grad;
  const int64_t streams = std::get<0>(key), span = std::get<1>(key);
  const int64_t requests = streams / 2, rows = drafts_ + 1, vocab = model_.vocab;
  const torch::Device device = model_.options.device();
  const auto long_options = torch::dtype(torch::kInt64).device(device);
  const torch::Tensor lengths = e.ints.narrow(0, streams, streams);
  const torch::Tensor first_positions = e.ints.narrow(0, 2 * streams, streams);
  const torch::Tensor last_positions = e.ints.narrow(0, 3 * streams, streams);
  const auto request_field = [&](int64_t field) {
    return e.ints.narrow(0, kStreamFields * streams + field * requests, requests);
  };
  const torch::Tensor params = e.ints.narrow(0, kStreamFields * streams, kRequestParams * requests)
                                   .view(torch::kFloat64)
                                   .view({kRequestParams, requests});
  const torch::Tensor last_tokens = request_field(kRequestParams);
  const torch::Tensor carried = request_field(kRequestParams + 1);
  const torch::Tensor judged = request_field(kRequestParams + 2);
  const torch::Tensor grouped = request_field(kRequestParams + 3).ne(0);
  RowFilters filters;
  if (std::get<2>(key)) {
    filters = {request_field(kRequestParams + 4).view({requests, 1, 1}),
               params.select(0, 4).to(torch::kFloat32).view({requests, 1, 1})};
  }
  // The chain's rows, the same ids in both streams of a request (expanded: see row_graphs.cc).
  const torch::Tensor chain = torch::cat({last_tokens.unsqueeze(1), e.drafts}, 1);
  const torch::Tensor ids =
      chain.unsqueeze(1).expand({requests, 2, rows}).reshape({streams, rows});
  const torch::Tensor steps = torch::arange(rows, long_options).unsqueeze(0);
  const torch::Tensor columns = torch::arange(span, long_options);
  PoolGraphs::Inputs in;
  in.inputs = {model_.embed(ids)};
  in.positions = torch::minimum(first_positions.unsqueeze(1) + steps, last_positions.unsqueeze(1));
  in.rows = lengths.unsqueeze(1) + steps;
  in.mask = columns.view({1, 1, span}) <= in.rows.unsqueeze(2);
  in.span = span;
  const torch::Tensor logits =
      model_.forward(*e.view, in)[1].to(torch::kFloat32).view({requests, 2, rows, vocab});
  // p as DecodeSession::Probabilities makes it: MixCfg, tempering, softmax; one-hot greedy.
  const torch::Tensor cfg = params.select(0, 0).to(torch::kFloat32).view({requests, 1, 1});
  const torch::Tensor temperature = params.select(0, 1).to(torch::kFloat32).view({requests, 1, 1});
  const torch::Tensor p =
      GuidedProbabilities(logits.select(1, 0), logits.select(1, 1), cfg, temperature,
                          /*one_hot_greedy=*/true, std::get<2>(key) ? &filters : nullptr);
  // q: the carried rows, then the fixed tokens' one-hot rows.
  const torch::Tensor fixed =
      torch::zeros_like(e.q).scatter_(2, e.drafts.unsqueeze(2), 1.0);
  const torch::Tensor has_q = (steps.narrow(1, 0, drafts_) < carried.unsqueeze(1)).unsqueeze(2);
  const torch::Tensor q = torch::where(has_q, e.q, fixed);
  // Judged as sampled chains: on a one-hot p the residual and the bonus draws give the argmax,
  // which is what a greedy chain takes (so no host flag enters the graph).
  std::vector<ChainCall> calls;
  const torch::Tensor draft_steps = steps.narrow(1, 0, drafts_);
  for (int64_t r = 0; r < requests; ++r) {
    calls.push_back({p.select(0, r), q.select(0, r), e.drafts.select(0, r),
                     e.accept.select(0, r), e.draw.narrow(0, r, 1), /*greedy=*/false});
    if (shape_.group_size > 1) {
      const torch::Tensor real = draft_steps.squeeze(0) < judged.narrow(0, r, 1);
      calls.back().pooled = JudgedMasses(
          p.select(0, r).narrow(0, 0, drafts_), q.select(0, r), e.drafts.select(0, r),
          embeddings_, shape_.group_size, params.select(0, 2).narrow(0, r, 1),
          params.select(0, 3).narrow(0, r, 1), grouped.narrow(0, r, 1), real);
    }
  }
  const torch::Tensor decisions = JudgeChains(calls);
  std::vector<torch::Tensor> result = {e.drafts, decisions.narrow(1, 0, kDecisionFields)};
  if (shape_.redraw) {
    result.push_back(
        RedrawRows(shape_.couple, p, q, e.drafts, e.accept, e.redraw, steps, decisions, judged));
    e.p = p;
  }
  // With groups: which kept drafts only the pooled masses kept (the acceptance map's marks).
  if (shape_.group_size > 1) result.push_back(decisions.narrow(1, kDecisionFields, drafts_));
  e.result = torch::cat(result, 1);
}

Status VerifyGraphs::CaptureKey(const Key& key) {
  const int64_t streams = std::get<0>(key);
  return GuardTorch("VerifyGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
    const torch::Device device = model_.options.device();
    const int64_t requests = streams / 2;
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    const auto long_options = torch::dtype(torch::kInt64).device(device);
    const auto double_options = torch::dtype(torch::kFloat64).device(device);
    std::unique_ptr<Inputs>& inputs = inputs_[streams];
    if (inputs == nullptr) {
      inputs = std::make_unique<Inputs>();
      // Until the first call fills them: every request a pad (the scratch slot, length 0,
      // greedy, token 0), so the captures' warm-ups write nowhere a request reads.
      inputs->ints = torch::cat(
          {torch::full({streams}, pool_.scratch_slot(), long_options),
           torch::zeros({(kStreamFields - 1) * streams + kRequestFields * requests},
                        long_options)});
      inputs->drafts = torch::zeros({requests, drafts_}, long_options);
      inputs->q = torch::zeros({requests, drafts_, model_.vocab},
                               torch::dtype(torch::kFloat32).device(device));
      inputs->accept = torch::zeros({requests, drafts_}, double_options);
      inputs->draw = torch::zeros({requests}, double_options);
      inputs->redraw = torch::zeros({requests, drafts_ + 1}, double_options);
      counts_.memory_bytes += (inputs->ints.numel() + inputs->drafts.numel() +
                               inputs->accept.numel() + inputs->draw.numel() +
                               inputs->redraw.numel()) * 8 + inputs->q.numel() * 4;
    }
    e->ints = inputs->ints;
    e->drafts = inputs->drafts;
    e->q = inputs->q;
    e->accept = inputs->accept;
    e->draw = inputs->draw;
    e->redraw = inputs->redraw;
    e->view.emplace(pool_.SlotIndexedView(e->ints.narrow(0, 0, streams)));
    auto run = [this, e, key] { Body(*e, key); };
    auto graph = ReplayableGraph::Make(device, run, model_.emulated, memory_pool_->memory);
    if (!graph.ok()) {
      ++counts_.failed_captures;
      return OkStatus();
    }
    e->graph = std::move(*graph);
    ++counts_.graphs;
    entries_[key] = std::move(entry);
    return OkStatus();
  });
}

bool VerifyGraphs::Fits(const KvCache& cache, const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  const bool filtered = HasFilters(sampling, model_.vocab);
  if (filtered && !shape_.filters) return false;
  const int64_t span = ForwardGraphs::RoundUpToSpan(cache.length() + drafts_ + 1);
  return span <= pool_.slot_rows() && entries_.count(Key(2, span, filtered)) > 0;
}

Status VerifyGraphs::CheckCall(const Call& call) const {
  if (call.cache == nullptr || !Fits(*call.cache, call.sampling)) {
    return InvalidArgumentError("VerifyGraphs::Run: a call does not fit the verify graphs");
  }
  if (call.group && call.group->size != shape_.group_size) {
    return InvalidArgumentError("VerifyGraphs::Run: group_size " +
                                std::to_string(call.group->size) + ", the graphs pool " +
                                std::to_string(shape_.group_size));
  }
  if (!call.drafts.defined() || call.drafts.numel() != drafts_ ||
      (call.q.defined() && (call.q.dim() != 2 || call.q.size(0) > drafts_)) ||
      !call.accept_uniforms.defined() || !call.draw_uniform.defined()) {
    return InvalidArgumentError("VerifyGraphs::Run: a call needs " + std::to_string(drafts_) +
                                " drafts, at most as many q rows and the rule's numbers");
  }
  return OkStatus();
}

StatusOr<std::vector<VerifyGraphs::Output>> VerifyGraphs::Run(
    const std::vector<Call>& calls) const {
  int64_t longest = 0;
  for (const Call& call : calls) {
    MULO_RETURN_IF_ERROR(CheckCall(call));
    longest = std::max(longest, call.cache->length() + drafts_ + 1);
  }
  const int64_t streams = PoolGraphs::Bucket(2 * static_cast<int64_t>(calls.size()));
  const int64_t span = ForwardGraphs::RoundUpToSpan(longest);
  const bool filtered =
      std::any_of(calls.begin(), calls.end(),
                  [this](const Call& call) { return HasFilters(call.sampling, model_.vocab); });
  auto it = entries_.find(Key(streams, span, filtered));
  if (it == entries_.end() && calls.size() > 1) {
    // A batch whose key failed to capture: each call alone (Fits holds the lone key).
    return RunEachAlone<Output>(calls, [this](const std::vector<Call>& one) { return Run(one); });
  }
  if (it == entries_.end()) {
    return FailedPreconditionError("VerifyGraphs::Run: no graph of " + std::to_string(streams) +
                                   " streams over " + std::to_string(span) + " rows");
  }
  Entry* e = it->second.get();
  const int64_t requests = streams / 2;
  return GuardTorch("VerifyGraphs::Run", [&]() -> StatusOr<std::vector<Output>> {
    at::NoGradGuard no_grad;
    std::vector<int64_t> ints = ChainInts(calls, streams, drafts_, pool_.scratch_slot());
    UploadInto(e->ints,
               torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())}, torch::kInt64));
    const bool whole = requests == 1;  // a lone request fills the buffers without views
    for (size_t r = 0; r < calls.size(); ++r) {
      const Call& call = calls[r];
      const int64_t at = static_cast<int64_t>(r);
      const auto row = [&](const torch::Tensor& t) { return whole ? t : t.narrow(0, at, 1); };
      row(e->drafts).copy_(call.drafts.view({1, drafts_}));
      if (call.q.defined() && call.q.size(0) > 0) {
        const int64_t c = call.q.size(0);
        (c == drafts_ ? row(e->q) : row(e->q).narrow(1, 0, c)).copy_(call.q.unsqueeze(0));
      }
      row(e->accept).copy_(call.accept_uniforms.view({1, drafts_}));
      row(e->draw).copy_(call.draw_uniform.view({1}));
      if (shape_.redraw && call.redraw_uniforms.defined()) {
        row(e->redraw).copy_(call.redraw_uniforms.view({1, drafts_ + 1}));
      }
    }
    e->graph->Replay();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.replays;
      counts_.calls += static_cast<int64_t>(calls.size());
    }
    // Every request's drafts and decision in one read (pads' rows included: no view).
    const torch::Tensor result = HostRead(e->result);
    const int64_t* const host = result.data_ptr<int64_t>();
    const int64_t width = result.size(1);
    // A copy of p (the next replay rewrites it), left on the device as the next q.
    const torch::Tensor p = shape_.redraw ? e->p.clone() : torch::Tensor();
    std::vector<Output> outputs;
    for (size_t r = 0; r < calls.size(); ++r) {
      const int64_t* const row = host + static_cast<int64_t>(r) * width;
      Output out;
      out.drafts.assign(row, row + drafts_);
      out.kept = row[drafts_];
      out.next_token = row[drafts_ + 1];
      out.neighbors = row[drafts_ + 3];
      const int64_t flags = shape_.group_size > 1 ? drafts_ : 0;
      if (shape_.redraw) {
        out.redraws.assign(row + drafts_ + kDecisionFields, row + width - flags);
        out.p = p.select(0, static_cast<int64_t>(r));
      }
      for (int64_t i = 0; i < flags; ++i) {
        if (row[width - flags + i] != 0) out.relaxed.push_back(i);
      }
      outputs.push_back(std::move(out));
      calls[r].cache->Advance(drafts_ + 1);
    }
    return outputs;
  });
}

}  // namespace mulo::engine
