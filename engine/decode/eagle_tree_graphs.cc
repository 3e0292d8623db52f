#include "engine/decode/eagle_tree_graphs.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/torch_guard.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"

namespace mulo::engine {

namespace {

// The ints before the pairs' tokens: the two head slots, the cache length, the pairs fed.
constexpr int64_t kFixedInts = 4;

bool SameTree(const DynamicTreeOptions& a, const DynamicTreeOptions& b) {
  return a.total_tokens == b.total_tokens && a.depth == b.depth && a.top_k == b.top_k;
}

}  // namespace

struct EagleTreeGraphs::Entry {
  // Static inputs on the device, filled per replay:
  //   ints [kFixedInts + max_pairs + 2] int64: slots, length, pairs, the pairs' tokens, then
  //     cfg_scale and temperature as float64 bits;
  //   features [2, max_pairs, dim]: the pairs' target features.
  torch::Tensor ints, features;
  std::optional<KvCache> view;  // the head pool's slots as the ints' first two index them
  DeviceDynamicTree::ChosenTree chosen;  // written by every replay
  std::unique_ptr<ReplayableGraph> graph;
};

EagleTreeGraphs::EagleTreeGraphs(const KvPool& pool, DynamicTreeOptions tree, int64_t max_pairs,
                                 Model model)
    : pool_(pool),
      tree_(tree),
      max_pairs_(max_pairs),
      model_(std::move(model)) {}

EagleTreeGraphs::~EagleTreeGraphs() = default;

StatusOr<std::shared_ptr<EagleTreeGraphs>> EagleTreeGraphs::Capture(const KvPool& pool,
                                                                    DynamicTreeOptions tree,
                                                                    int64_t max_pairs,
                                                                    Model model) {
  if (pool.scratch_slot() < 0) {
    return InvalidArgumentError("EagleTreeGraphs: the pool needs a scratch slot");
  }
  if (tree.depth < 0 || tree.top_k < 1 || tree.total_tokens < 1 || max_pairs < 1) {
    return InvalidArgumentError("EagleTreeGraphs: a tree needs a top_k, tokens and pairs");
  }
  std::shared_ptr<EagleTreeGraphs> graphs(
      new EagleTreeGraphs(pool, tree, max_pairs, std::move(model)));
  EagleTreeGraphs* const raw = graphs.get();
  MULO_RETURN_IF_ERROR(graphs->set_.CaptureSpans(
      pool, graphs->rows_written(), graphs->model_.options.device(),
      [raw](int64_t span) { return raw->CaptureSpan(span); }));
  return graphs;
}

torch::Tensor EagleTreeGraphs::LogRanking(const torch::Tensor& features, const torch::Tensor& cfg,
                                          const torch::Tensor& divisor) const {
  // DecodeSession::RankingProbabilities with the request's numbers as tensors: MixCfg, then
  // ToProbabilities' tempering (by 1 when greedy) and softmax.
  const torch::Tensor logits = model_.logits(features);
  const torch::Tensor cond = logits.select(0, 0), uncond = logits.select(0, 1);
  const torch::Tensor guided = uncond + cfg * (cond - uncond);
  return torch::softmax(guided / divisor, -1).log();
}

void EagleTreeGraphs::Body(Entry& e, int64_t span) const {
  torch::NoGradGuard no_grad;
  const int64_t pairs_max = max_pairs();
  const auto longs = torch::dtype(torch::kInt64).device(model_.options.device());
  const torch::Tensor length = e.ints.narrow(0, 2, 1);
  const torch::Tensor pairs = e.ints.narrow(0, 3, 1);
  const torch::Tensor params = e.ints.narrow(0, kFixedInts + pairs_max, 2).view(torch::kFloat64);
  const torch::Tensor cfg = params.narrow(0, 0, 1).to(torch::kFloat32);
  const torch::Tensor temperature = params.narrow(0, 1, 1).to(torch::kFloat32);
  const torch::Tensor divisor =
      torch::where(temperature == 0, torch::ones_like(temperature), temperature);
  const torch::Tensor columns = torch::arange(span, longs);
  // 1. The catch-up: pair j at cache row length + j, causal (pads past the pairs included).
  PoolGraphs::Inputs in;
  in.span = span;
  {
    const torch::Tensor ids =
        e.ints.narrow(0, kFixedInts, pairs_max).unsqueeze(0).expand({2, pairs_max}).contiguous();
    in.rows = (length + torch::arange(pairs_max, longs)).unsqueeze(0).expand({2, pairs_max});
    in.positions = in.rows;
    in.mask = columns.view({1, 1, span}) <= in.rows.unsqueeze(2);
    in.inputs = {model_.embed(ids), e.features};
  }
  // The root's prediction: the last real pair's.
  torch::Tensor fed = model_.head(*e.view, in)[0].index_select(1, pairs - 1);
  const torch::Tensor committed = length + pairs;
  const torch::Tensor relative = columns - committed;  // column c is tree slot c - committed
  const torch::Tensor before_tree = (relative < 0).unsqueeze(0);
  // 2. The tree, as EagleProposer::GrowDynamic grows it; `fed`: the root's and every slot's
  // predicted features, in slot order.
  DeviceDynamicTree tree(tree_);
  tree.Start(LogRanking(fed, cfg, divisor)[0]);
  while (tree.expansions_left() > 0) {
    const DeviceDynamicTree::Feed feed = tree.NextFeed();
    const int64_t m = feed.tokens.size(0), slots = tree.slots_fed();
    const torch::Tensor rows = committed + slots + torch::arange(m, longs);
    // Each node sees the committed rows, its ancestors' slots and its own row.
    torch::Tensor mask = before_tree | (columns.unsqueeze(0) == rows.unsqueeze(1));
    if (slots > 0) {
      const torch::Tensor in_tree = (relative >= 0) & (relative < slots);
      mask = mask | (feed.attends.index_select(1, relative.clamp(0, slots - 1)) &
                     in_tree.unsqueeze(0));
    }
    in.rows = rows.unsqueeze(0).expand({2, m});
    in.positions = in.rows;
    in.mask = mask.unsqueeze(0).expand({2, m, span});
    in.inputs = {model_.embed(feed.tokens.unsqueeze(0).expand({2, m}).contiguous()),
                 fed.index_select(1, feed.parent_slot + 1)};
    const torch::Tensor predicted = model_.head(*e.view, in)[0];
    fed = torch::cat({fed, predicted}, 1);
    tree.Expand(LogRanking(predicted, cfg, divisor));
  }
  StatusOr<DeviceDynamicTree::ChosenTree> chosen = tree.ChosenTreeOnDevice();
  if (!chosen.ok()) throw std::runtime_error(std::string(chosen.status().message()));
  e.chosen = *std::move(chosen);
}

Status EagleTreeGraphs::CaptureSpan(int64_t span) {
  return GuardTorch("EagleTreeGraphs::Capture", [&]() -> Status {
    torch::NoGradGuard no_grad;
    const torch::Device device = model_.options.device();
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    // Until the first call fills them: the scratch slot, length 0, one pair, greedy (cfg_scale
    // and temperature 0.0), so that the capture's warm-up writes nowhere a request reads.
    e->ints = torch::zeros({kFixedInts + max_pairs() + 2}, torch::dtype(torch::kInt64).device(device));
    e->ints.narrow(0, 0, 2).fill_(pool_.scratch_slot());
    e->ints.narrow(0, 3, 1).fill_(1);
    e->features = torch::zeros({2, max_pairs(), model_.dim}, model_.options);
    e->view.emplace(pool_.SlotIndexedView(e->ints.narrow(0, 0, 2)));
    e->graph = set_.Make(
        device, [this, e, span] { Body(*e, span); }, model_.emulated,
        e->ints.numel() * 8 + e->features.numel() * e->features.element_size());
    if (e->graph != nullptr) entries_[span] = std::move(entry);
    return OkStatus();
  });
}

bool EagleTreeGraphs::Fits(const KvCache& cache, int64_t pairs, const DynamicTreeOptions& options,
                           const SamplingParams& sampling) const {
  if (cache.pool() != &pool_ || cache.batch() != 2) return false;
  if (pairs < 1 || pairs > max_pairs() || !SameTree(options, tree_)) return false;
  // The ranking distribution is the request's own when it samples: no filter in the graph.
  if (sampling.temperature != 0.0 &&
      ((sampling.top_k > 0 && sampling.top_k < model_.vocab) || sampling.top_p < 1.0)) {
    return false;
  }
  const int64_t span = ForwardGraphs::RoundUpToSpan(cache.length() + rows_written());
  return span <= pool_.slot_rows() && entries_.count(span) > 0;
}

StatusOr<DeviceDynamicTree::ChosenTree> EagleTreeGraphs::Run(const Call& call) const {
  const int64_t pairs = static_cast<int64_t>(call.tokens.size());
  if (call.cache == nullptr || !Fits(*call.cache, pairs, tree_, call.sampling)) {
    return InvalidArgumentError("EagleTreeGraphs::Run: the call does not fit the tree graphs");
  }
  if (!call.features.defined() || call.features.dim() != 3 || call.features.size(0) != 2 ||
      call.features.size(1) != pairs || call.features.size(2) != model_.dim) {
    return InvalidArgumentError("EagleTreeGraphs::Run: features: expected [2, " +
                                std::to_string(pairs) + ", " + std::to_string(model_.dim) + "]");
  }
  const int64_t span = ForwardGraphs::RoundUpToSpan(call.cache->length() + rows_written());
  auto it = entries_.find(span);
  if (it == entries_.end()) {
    return FailedPreconditionError("EagleTreeGraphs::Run: no graph over " + std::to_string(span) +
                                   " rows");
  }
  Entry* e = it->second.get();
  return GuardTorch("EagleTreeGraphs::Run", [&]() -> StatusOr<DeviceDynamicTree::ChosenTree> {
    torch::NoGradGuard no_grad;
    std::vector<int64_t> ints(kFixedInts + max_pairs() + 2, 0);
    ints[0] = call.cache->first_slot();
    ints[1] = call.cache->first_slot() + 1;
    ints[2] = call.cache->length();
    ints[3] = pairs;
    std::copy(call.tokens.begin(), call.tokens.end(), ints.begin() + kFixedInts);
    double* const params = reinterpret_cast<double*>(ints.data() + kFixedInts + max_pairs());
    static_assert(sizeof(double) == sizeof(int64_t), "params ride in the int64 upload");
    params[0] = call.sampling.cfg_scale;
    params[1] = call.sampling.temperature;
    UploadInto(e->ints, torch::from_blob(ints.data(), {static_cast<int64_t>(ints.size())},
                                         torch::kInt64));
    // Pad pairs keep stale features: only pad rows, which nothing attends, read them.
    e->features.narrow(1, 0, pairs).copy_(call.features);
    e->graph->Replay();
    set_.CountReplay(1);
    call.cache->Advance(pairs);
    // Copies: the next replay (another request's step, in an engine loop) rewrites them.
    DeviceDynamicTree::ChosenTree chosen = e->chosen;
    chosen.tokens = chosen.tokens.clone();
    chosen.parents = chosen.parents.clone();
    chosen.depths = chosen.depths.clone();
    chosen.ancestors = chosen.ancestors.clone();
    return chosen;
  });
}

}  // namespace mulo::engine
