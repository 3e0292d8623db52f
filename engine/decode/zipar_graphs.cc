#include "engine/decode/zipar_graphs.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {

namespace {

// One forward's ints, in order: per stream its slot and cache length; per request cfg_scale,
// temperature and top_p (float64 bits), top_k and the sequence position of raster 0; per
// request row its token, raster and drawing input; per request column its raster; per request
// row the raster of its token on the device and the raster its draw predicts; per request the
// index of its first draw's number among its chain's. A chain's forwards follow one another.
struct Layout {
  Layout(int64_t streams, int64_t rows, int64_t span)
      : streams(streams), requests(streams / 2), rows(rows), span(span) {}
  int64_t streams, requests, rows, span;
  int64_t lengths() const { return streams; }
  int64_t params() const { return 2 * streams; }
  int64_t top_k() const { return params() + 3 * requests; }
  int64_t offsets() const { return top_k() + requests; }
  int64_t tokens() const { return offsets() + requests; }
  int64_t rasters() const { return tokens() + requests * rows; }
  int64_t draws() const { return rasters() + requests * rows; }
  int64_t columns() const { return draws() + requests * rows; }
  int64_t sources() const { return columns() + requests * span; }
  int64_t predicts() const { return sources() + requests * rows; }
  int64_t first_numbers() const { return predicts() + requests * rows; }
  int64_t size() const { return first_numbers() + requests; }
};

// A raster no input's is above: placeholders', pads' and empty rows' columns, seen by no one.
constexpr int64_t kUnseen = int64_t{1} << 40;
// A pad input's own raster: it sees no column but its own row.
constexpr int64_t kPadRaster = -2;

// One forward's ints (Layout's) for `calls` (null: a pad) over caches of `lengths` rows, whose
// first draws take their chain's numbers from `first_numbers`; pads keep the scratch slot and
// length 0, their draws written to the tokens' spare column `spare`.
std::vector<int64_t> StepInts(const std::vector<const ZipArGraphs::Call*>& calls,
                              const std::vector<int64_t>& lengths,
                              const std::vector<int64_t>& first_numbers, const Layout& at,
                              int64_t scratch_slot, int64_t spare) {
  std::vector<int64_t> ints(at.size(), 0);
  std::fill(ints.begin(), ints.begin() + at.streams, scratch_slot);
  std::fill(ints.begin() + at.rasters(), ints.begin() + at.draws(), kPadRaster);
  std::fill(ints.begin() + at.columns(), ints.begin() + at.sources(), kUnseen);
  std::fill(ints.begin() + at.predicts(), ints.end(), spare);
  double* const params = reinterpret_cast<double*>(ints.data() + at.params());
  static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i] == nullptr) continue;
    const ZipArGraphs::Call& call = *calls[i];
    const int64_t r = static_cast<int64_t>(i);
    const int64_t length = lengths[i];
    ints[at.first_numbers() + r] = first_numbers[i];
    for (int64_t b = 0; b < 2; ++b) {
      ints[2 * r + b] = call.cache->first_slot() + b;
      ints[at.lengths() + 2 * r + b] = length;
    }
    params[r] = call.sampling.cfg_scale;
    params[at.requests + r] = call.sampling.temperature;
    params[2 * at.requests + r] = call.sampling.top_p;
    ints[at.top_k() + r] = call.sampling.top_k;
    ints[at.offsets() + r] = call.position_offset;
    const int64_t n = static_cast<int64_t>(call.tokens.size());
    int64_t* const columns = ints.data() + at.columns() + r * at.span;
    std::fill(columns, columns + call.condition_rows, -1);
    std::copy(call.cached.begin(), call.cached.end(), columns + call.condition_rows);
    for (int64_t k = 0; k < n; ++k) {
      ints[at.tokens() + r * at.rows + k] = call.tokens[k];
      ints[at.rasters() + r * at.rows + k] = call.rasters[k];
      columns[length + k] = call.placeholders[k] ? kUnseen : call.rasters[k];
    }
    std::copy(call.draws.begin(), call.draws.end(), ints.begin() + at.draws() + r * at.rows);
    std::copy(call.sources.begin(), call.sources.end(), ints.begin() + at.sources() + r * at.rows);
    std::copy(call.predicts.begin(), call.predicts.end(),
              ints.begin() + at.predicts() + r * at.rows);
  }
  return ints;
}

// Whether every input of `call` has its id: known on the host, or at a source raster in the
// grid's `cells` (the graphs' tokens); a known id's source, if given, is -1 or in the grid.
bool IdsFound(const ZipArGraphs::Call& call, int64_t cells) {
  if (!call.sources.empty() && call.sources.size() != call.tokens.size()) return false;
  for (size_t k = 0; k < call.tokens.size(); ++k) {
    const int64_t source = call.sources.empty() ? -1 : call.sources[k];
    const int64_t lowest = call.tokens[k] >= 0 ? -1 : 0;
    if (source < lowest || source >= cells) return false;
  }
  return true;
}

// Whether `call`'s predicted rasters, if given, are one per draw and in the grid's `cells`.
bool PredictsInGrid(const ZipArGraphs::Call& call, int64_t cells) {
  if (call.predicts.empty()) return true;
  return call.predicts.size() == call.draws.size() &&
         std::all_of(call.predicts.begin(), call.predicts.end(),
                     [cells](int64_t r) { return r >= 0 && r < cells; });
}

// Per-request values [requests, ...] repeated for both of its streams: [streams, ...].
torch::Tensor PerStream(const torch::Tensor& per_request) {
  std::vector<int64_t> sizes = per_request.sizes().vec();
  sizes.insert(sizes.begin() + 1, 2);
  std::vector<int64_t> flat = per_request.sizes().vec();
  flat[0] *= 2;
  return per_request.unsqueeze(1).expand(sizes).reshape(flat);
}

}  // namespace

struct ZipArGraphs::Entry {
  // Static inputs on the device, filled per replay: ints, every forward's Layout one after
  // the other, int64 (one upload), and numbers [requests, the forwards' rows] float64 (one
  // copy per sampled request: its chain's numbers, in order).
  torch::Tensor ints, numbers;
  torch::Tensor numbers_flat;  // numbers viewed as one row: a request's at requests x width
  std::vector<KvCache> views;  // per forward: the pool's slots as its ints' slots index them
  std::vector<int64_t> ints_at, result_at;  // per forward: where its ints and draws start
  torch::Tensor result;  // per forward [requests, its rows] int64, written by every replay
  std::unique_ptr<ReplayableGraph> graph;
};

ZipArGraphs::ZipArGraphs(const KvPool& pool, int64_t grid, RowGraphs::Model model)
    : pool_(pool), grid_(grid), model_(std::move(model)) {}

ZipArGraphs::~ZipArGraphs() = default;

PoolGraphs::Counts ZipArGraphs::counts() const { return set_.counts(); }

torch::Tensor ZipArGraphs::Tokens(const KvCache& cache) const {
  return tokens_.select(0, cache.first_slot()).narrow(0, 0, grid_ * grid_);
}

torch::Tensor ZipArGraphs::TokensAt(const KvCache& cache, int64_t from, int64_t count) const {
  return flat_tokens_.narrow(0, cache.first_slot() * tokens_.size(1) + from, count);
}

Status ZipArGraphs::SetToken(const KvCache& cache, int64_t raster,
                             const torch::Tensor& token) const {
  if (cache.pool() != &pool_ || raster < 0 || raster >= grid_ * grid_ || token.numel() != 1) {
    return InvalidArgumentError("ZipArGraphs::SetToken: a token of this pool's grid");
  }
  return GuardTorch("ZipArGraphs::SetToken", [&]() -> Status {
    tokens_.select(0, cache.first_slot()).narrow(0, raster, 1).copy_(token.reshape({1}));
    return OkStatus();
  });
}

int64_t ZipArGraphs::RowsOf(int64_t inputs) {
  return PoolGraphs::Bucket(std::max<int64_t>(inputs, 1));
}

StatusOr<std::shared_ptr<ZipArGraphs>> ZipArGraphs::Capture(
    const KvPool& pool, int64_t grid, RowGraphs::Model model, bool filters,
    const std::set<std::vector<int64_t>>& chains) {
  if (pool.scratch_slot() < 0) {
    return InvalidArgumentError("ZipArGraphs: the pool needs a scratch slot for pad requests");
  }
  if (grid < 1) return InvalidArgumentError("ZipArGraphs: a grid of at least one token");
  std::shared_ptr<ZipArGraphs> graphs(new ZipArGraphs(pool, grid, std::move(model)));
  const torch::Device device = graphs->model_.options.device();
  graphs->filters_ = filters;
  graphs->tokens_ = torch::zeros({pool.scratch_slot() + 1, grid * grid + 1},
                                 torch::dtype(torch::kInt64).device(device));
  graphs->flat_tokens_ = graphs->tokens_.view({-1});
  // Forwards of every rows bucket; a lone request's chains as they come; a batch's chains
  // padded to their widest forward (fewer graphs to make at load, each a chain's forwards).
  std::set<std::vector<int64_t>> lone, batched;
  for (int64_t rows = 1; rows <= RowsOf(grid + 1); rows *= 2) lone.insert({rows});
  batched = lone;
  for (const std::vector<int64_t>& chain : chains) {
    if (chain.empty()) continue;
    graphs->chain_forwards_ =
        std::max<int64_t>(graphs->chain_forwards_, static_cast<int64_t>(chain.size()));
    lone.insert(chain);
    batched.insert(Uniform(chain));
  }
  for (const bool filtered : {false, true}) {
    if (filtered && !filters) break;
    for (int64_t streams = 2; streams <= PoolGraphs::Bucket(pool.slots()); streams *= 2) {
      for (const std::vector<int64_t>& rows : streams == 2 ? lone : batched) {
        const int64_t widest = *std::max_element(rows.begin(), rows.end());
        MULO_RETURN_IF_ERROR(graphs->set_.CaptureSpans(pool, widest, device, [&](int64_t span) {
          return graphs->CaptureKey(Key(streams, span, filtered, rows));
        }));
      }
    }
  }
  return graphs;
}

std::vector<int64_t> ZipArGraphs::Uniform(const std::vector<int64_t>& rows) {
  return std::vector<int64_t>(rows.size(), *std::max_element(rows.begin(), rows.end()));
}

void ZipArGraphs::Body(Entry& e, const Key& key, int64_t forward) const {
  at::NoGradGuard no_grad;
  const int64_t streams = std::get<0>(key), span = std::get<1>(key);
  const bool filtered = std::get<2>(key);
  const int64_t rows = std::get<3>(key)[forward];
  const Layout at(streams, rows, span);
  const int64_t requests = at.requests, vocab = model_.vocab;
  const auto long_options = torch::dtype(torch::kInt64).device(model_.options.device());
  const torch::Tensor ints = e.ints.narrow(0, e.ints_at[forward], at.size());
  const auto field = [&](int64_t from, int64_t width) {
    return ints.narrow(0, from, requests * width).view({requests, width});
  };
  const torch::Tensor lengths = ints.narrow(0, at.lengths(), streams);
  const torch::Tensor params =
      ints.narrow(0, at.params(), 3 * requests).view(torch::kFloat64).view({3, requests});
  const torch::Tensor offsets = PerStream(ints.narrow(0, at.offsets(), requests));
  const torch::Tensor own = PerStream(field(at.rasters(), rows));          // [streams, rows]
  const torch::Tensor columns = PerStream(field(at.columns(), span));     // [streams, span]
  // Each request's tokens row (its first stream's slot): an input the host does not know takes
  // its id there, where the chain's earlier forwards left it.
  const torch::Tensor slots = ints.narrow(0, 0, streams).view({requests, 2}).select(1, 0);
  const torch::Tensor known = field(at.tokens(), rows);
  const torch::Tensor on_device =
      tokens_.index_select(0, slots).gather(1, field(at.sources(), rows).clamp_min(0));
  const torch::Tensor ids = torch::where(known.ge(0), known, on_device);
  PoolGraphs::Inputs in;
  in.inputs = {model_.embed(PerStream(ids))};
  in.rows = lengths.unsqueeze(1) + torch::arange(rows, long_options).unsqueeze(0);
  in.positions = offsets.unsqueeze(1) + own.clamp_min(0);
  // ZipAR's wavefront: a column whose token's raster is smaller than the input's, or the
  // input's own row.
  in.mask = (columns.unsqueeze(1) < own.unsqueeze(2)) |
            (torch::arange(span, long_options).view({1, 1, span}) == in.rows.unsqueeze(2));
  in.span = span;
  const torch::Tensor logits = model_.forward(e.views[forward], in)[1].to(torch::kFloat32);
  // Draw j of a request reads its drawing input's row, with its j-th number of this forward.
  const torch::Tensor draws = field(at.draws(), rows).view({requests, 1, rows, 1});
  const torch::Tensor picked = logits.view({requests, 2, rows, vocab})
                                   .gather(2, draws.expand({requests, 2, rows, vocab}));
  const torch::Tensor cfg = params.select(0, 0).to(torch::kFloat32).view({requests, 1, 1});
  const torch::Tensor temperature = params.select(0, 1).to(torch::kFloat32).view({requests, 1, 1});
  RowFilters filters;
  if (filtered) {
    filters = {ints.narrow(0, at.top_k(), requests).view({requests, 1, 1}),
               params.select(0, 2).to(torch::kFloat32).view({requests, 1, 1})};
  }
  const torch::Tensor p =
      GuidedProbabilities(picked.select(1, 0), picked.select(1, 1), cfg, temperature,
                          /*one_hot_greedy=*/true, filtered ? &filters : nullptr);
  const torch::Tensor number_index =
      (ints.narrow(0, at.first_numbers(), requests).view({requests, 1}) +
       torch::arange(rows, long_options).view({1, rows}))
          .clamp_max(e.numbers.size(1) - 1);
  const torch::Tensor numbers = e.numbers.gather(1, number_index);
  const torch::Tensor drawn =
      DrawRows(p.reshape({requests * rows, vocab}), numbers.reshape({-1})).view({requests, rows});
  e.result.narrow(0, e.result_at[forward], requests * rows).view({requests, rows}).copy_(drawn);
  // Every draw into its request's tokens (rows that draw nothing: the spare column), where the
  // chain's next forwards and the caller find them.
  tokens_.index_put_({slots.unsqueeze(1).expand({requests, rows}), field(at.predicts(), rows)},
                     drawn);
}

Status ZipArGraphs::CaptureKey(const Key& key) {
  const int64_t streams = std::get<0>(key), span = std::get<1>(key);
  const std::vector<int64_t>& rows = std::get<3>(key);
  const int64_t forwards = static_cast<int64_t>(rows.size());
  return GuardTorch("ZipArGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
    const torch::Device device = model_.options.device();
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    // Until the first call fills them: every request a pad (the scratch slot, length 0,
    // greedy), so the capture's warm-up writes nowhere a request reads.
    std::vector<int64_t> all;
    int64_t results = 0, all_rows = 0;
    for (int64_t j = 0; j < forwards; ++j) {
      const Layout at(streams, rows[j], span);
      const std::vector<int64_t> pads =
          StepInts({}, {}, {}, at, pool_.scratch_slot(), grid_ * grid_);
      e->ints_at.push_back(static_cast<int64_t>(all.size()));
      e->result_at.push_back(results);
      all.insert(all.end(), pads.begin(), pads.end());
      results += at.requests * rows[j];
      all_rows += rows[j];
    }
    e->ints = torch::tensor(all, torch::kInt64).to(device);
    e->numbers =
        torch::zeros({streams / 2, all_rows}, torch::dtype(torch::kFloat64).device(device));
    e->numbers_flat = e->numbers.view({-1});
    e->result = torch::zeros({results}, torch::dtype(torch::kInt64).device(device));
    for (int64_t j = 0; j < forwards; ++j) {
      e->views.push_back(pool_.SlotIndexedView(e->ints.narrow(0, e->ints_at[j], streams)));
    }
    auto run = [this, e, key, forwards] {
      for (int64_t j = 0; j < forwards; ++j) Body(*e, key, j);
    };
    e->graph = set_.Make(device, run, model_.emulated, (e->ints.numel() + e->numbers.numel()) * 8);
    if (e->graph != nullptr) entries_[key] = std::move(entry);
    return OkStatus();
  });
}

bool ZipArGraphs::Fits(const KvCache& cache, int64_t inputs, const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  const bool filtered = HasFilters(sampling, model_.vocab);
  if ((filtered && !filters_) || inputs < 1) return false;
  const int64_t rows = RowsOf(inputs);
  const int64_t span = ForwardGraphs::RoundUpToSpan(cache.length() + rows);
  return span <= pool_.slot_rows() && entries_.count(Key(2, span, filtered, {rows})) > 0;
}

bool ZipArGraphs::WellFormed(const Call& call, int64_t length) const {
  const int64_t n = static_cast<int64_t>(call.tokens.size());
  const int64_t draws = static_cast<int64_t>(call.draws.size());
  const bool draws_in_range =
      std::all_of(call.draws.begin(), call.draws.end(), [&](int64_t k) { return k >= 0 && k < n; });
  return static_cast<int64_t>(call.rasters.size()) == n &&
         static_cast<int64_t>(call.placeholders.size()) == n && draws_in_range && draws <= n &&
         IdsFound(call, grid_ * grid_) && PredictsInGrid(call, grid_ * grid_) &&
         call.condition_rows + static_cast<int64_t>(call.cached.size()) == length;
}

bool ZipArGraphs::ChainShape(const Chain& chain, ChainPlan* plan) const {
  if (chain.forwards.empty()) return false;
  const KvCache* cache = chain.forwards[0].cache;
  if (cache == nullptr || cache->pool() != &pool_ || cache->batch() != 2) return false;
  plan->filtered = HasFilters(chain.forwards[0].sampling, model_.vocab);
  if (plan->filtered && !filters_) return false;
  int64_t length = cache->length(), draws = 0;
  for (const Call& call : chain.forwards) {
    const int64_t n = static_cast<int64_t>(call.tokens.size());
    if (call.cache != cache || n < 1 || !WellFormed(call, length)) return false;
    plan->rows.push_back(RowsOf(n));
    plan->lengths.push_back(length);
    draws += static_cast<int64_t>(call.draws.size());
    length += n - std::count(call.placeholders.begin(), call.placeholders.end(), true);
  }
  return !chain.uniforms.defined() || chain.uniforms.numel() == draws;
}

int64_t ZipArGraphs::SpanOf(const std::vector<ChainPlan>& plans, const std::vector<int64_t>& rows) {
  int64_t longest = 0;
  for (const ChainPlan& plan : plans) {
    for (size_t j = 0; j < plan.lengths.size(); ++j) {
      longest = std::max(longest, plan.lengths[j] + rows[j]);
    }
  }
  return ForwardGraphs::RoundUpToSpan(longest);
}

bool ZipArGraphs::FitsPlan(const ChainPlan& plan) const {
  const int64_t span = SpanOf({plan}, plan.rows);
  return span <= pool_.slot_rows() && entries_.count(Key(2, span, plan.filtered, plan.rows)) > 0;
}

bool ZipArGraphs::FitsChain(const Chain& chain) const {
  ChainPlan plan;
  return ChainShape(chain, &plan) && FitsPlan(plan);
}

StatusOr<std::vector<ZipArGraphs::Output>> ZipArGraphs::Run(const std::vector<Call>& calls) const {
  std::vector<Chain> chains;
  for (const Call& call : calls) {
    const int64_t n = static_cast<int64_t>(call.tokens.size());
    if (call.cache == nullptr || !Fits(*call.cache, n, call.sampling)) {
      return InvalidArgumentError("ZipArGraphs::Run: a call does not fit the graphs");
    }
    chains.push_back({{call}, call.uniforms});
  }
  return RunChains(chains);
}

StatusOr<std::vector<ZipArGraphs::Output>> ZipArGraphs::RunChains(
    const std::vector<Chain>& chains) const {
  std::vector<ChainPlan> plans(chains.size());
  std::vector<int64_t> rows;  // per forward, the widest chain's rows there
  bool filtered = false;
  for (size_t i = 0; i < chains.size(); ++i) {
    if (!ChainShape(chains[i], &plans[i]) || !FitsPlan(plans[i])) {
      return InvalidArgumentError(
          "ZipArGraphs::Run: every forward needs a raster and a placeholder flag per input (and "
          "a source in the grid for an id it does not know), draws among its inputs with a "
          "number each (and a raster in the grid, if any), a raster per cached row, and to fit "
          "the graphs");
    }
    const std::vector<int64_t>& own = plans[i].rows;
    if (own.size() > rows.size()) rows.resize(own.size(), 1);
    for (size_t j = 0; j < own.size(); ++j) rows[j] = std::max(rows[j], own[j]);
    filtered = filtered || plans[i].filtered;
  }
  const int64_t streams = PoolGraphs::Bucket(2 * static_cast<int64_t>(chains.size()));
  // The chains' own rows where a graph has them (a lone chain, or lock-step ones), else every
  // forward padded to the widest.
  auto it = entries_.find(Key(streams, SpanOf(plans, rows), filtered, rows));
  if (it == entries_.end()) {
    rows = Uniform(rows);
    it = entries_.find(Key(streams, SpanOf(plans, rows), filtered, rows));
  }
  if (it == entries_.end() && chains.size() > 1) {
    // A batch whose key was not captured: each chain alone (FitsChain holds its lone key).
    return RunEachAlone<Output>(chains,
                                [this](const std::vector<Chain>& one) { return RunChains(one); });
  }
  if (it == entries_.end()) {
    return FailedPreconditionError("ZipArGraphs::Run: no graph of " + std::to_string(streams) +
                                   " streams and " + std::to_string(rows.size()) + " forwards");
  }
  return Replay(*it->second, streams, rows, std::get<1>(it->first), chains, plans);
}

StatusOr<std::vector<ZipArGraphs::Output>> ZipArGraphs::Replay(
    Entry& e, int64_t streams, const std::vector<int64_t>& rows, int64_t span,
    const std::vector<Chain>& chains, const std::vector<ChainPlan>& plans) const {
  return GuardTorch("ZipArGraphs::Run", [&]() -> StatusOr<std::vector<Output>> {
    at::NoGradGuard no_grad;
    const int64_t forwards = static_cast<int64_t>(rows.size());
    // Forward by forward: each chain's cache length (its plan's) and first number as that
    // forward runs.
    std::vector<int64_t> ints, lengths(chains.size(), 0), numbers(chains.size(), 0);
    for (int64_t j = 0; j < forwards; ++j) {
      const Layout at(streams, rows[j], span);
      std::vector<const Call*> calls(chains.size(), nullptr);
      for (size_t i = 0; i < chains.size(); ++i) {
        if (j >= static_cast<int64_t>(chains[i].forwards.size())) continue;
        calls[i] = &chains[i].forwards[j];
        lengths[i] = plans[i].lengths[j];
      }
      const std::vector<int64_t> step =
          StepInts(calls, lengths, numbers, at, pool_.scratch_slot(), grid_ * grid_);
      ints.insert(ints.end(), step.begin(), step.end());
      for (size_t i = 0; i < chains.size(); ++i) {
        if (calls[i] != nullptr) numbers[i] += static_cast<int64_t>(calls[i]->draws.size());
      }
    }
    UploadInto(e.ints,
               torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())}, torch::kInt64));
    for (size_t i = 0; i < chains.size(); ++i) {
      // Greedy: p is one-hot, which every number in [0, 1) draws the same from.
      const torch::Tensor& uniforms = chains[i].uniforms;
      if (!uniforms.defined() || uniforms.numel() == 0) continue;
      e.numbers_flat.narrow(0, static_cast<int64_t>(i) * e.numbers.size(1), uniforms.numel())
          .copy_(uniforms.dim() == 1 ? uniforms : uniforms.view({-1}));
    }
    e.graph->Replay();
    set_.CountReplay(static_cast<int64_t>(chains.size()));
    const bool read = std::any_of(chains.begin(), chains.end(), [](const Chain& chain) {
      return std::any_of(chain.forwards.begin(), chain.forwards.end(),
                         [](const Call& call) { return call.read; });
    });
    // Every asking forward's draws, one read: per forward [requests, its rows].
    const torch::Tensor result = read ? HostRead(e.result) : torch::Tensor();
    std::vector<Output> outputs(chains.size());
    for (size_t i = 0; i < chains.size(); ++i) {
      const std::vector<Call>& chain = chains[i].forwards;
      for (size_t j = 0; j < chain.size(); ++j) {
        if (!chain[j].read) continue;
        const int64_t* const row =
            result.data_ptr<int64_t>() + e.result_at[j] + static_cast<int64_t>(i) * rows[j];
        outputs[i].drawn.insert(outputs[i].drawn.end(), row, row + chain[j].draws.size());
      }
      KvCache* cache = chain[0].cache;
      cache->Advance(plans[i].lengths.back() + static_cast<int64_t>(chain.back().tokens.size()) -
                     cache->length());
    }
    return outputs;
  });
}

}  // namespace mulo::engine
