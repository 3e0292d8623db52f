#include "engine/decode/mulo.h"

#include <algorithm>
#include <chrono>

#include "engine/core/torch_guard.h"
#include "engine/decode/ar.h"
#include "engine/decode/feed_tokens.h"
#include "engine/sampling/latent_neighbors.h"
#include "engine/sampling/logits_processor.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/sampler.h"

namespace mulo::engine {
namespace {

// One model's stream: its KV cache, the tokens fed so far and the logits predicting the next.
struct Stream {
  const Transformer* model;
  KvCache cache;
  std::vector<int64_t> fed;  // raster tokens whose rows are in the cache
  torch::Tensor next_logits;  // [batch, V] for position fed.size()

  // Feeds tokens[from, to) (raster positions) and updates next_logits.
  Status Feed(const std::vector<int64_t>& tokens, int64_t from, int64_t to, Stats* stats,
              bool drafter) {
    if (to <= from) return OkStatus();
    MULO_ASSIGN_OR_RETURN(torch::Tensor logits,
                          FeedTokens(*model, cache, tokens, from, to, LogitsMode::kLast));
    next_logits = logits.select(1, 0);
    fed.insert(fed.end(), tokens.begin() + from, tokens.begin() + to);
    ++(drafter ? stats->draft_forward_passes : stats->target_forward_passes);
    return OkStatus();
  }

  // Rolls back to the first `n` tokens.
  Status Truncate(int64_t n) {
    fed.resize(n);
    return cache.Truncate(model->config().cls_token_num + n);
  }
};

}  // namespace

Status ValidateMuloOptions(const MuloOptions& o) {
  if (!(o.tau >= 0.0)) return InvalidArgumentError("mulo.tau: must be >= 0");
  if (o.k < 1) return InvalidArgumentError("mulo.k: must be >= 1");
  if (!(o.delta >= 0.0 && o.delta <= 1.0)) {
    return InvalidArgumentError("mulo.delta: must be in [0, 1]");
  }
  if (o.radius < 0) return InvalidArgumentError("mulo.radius: must be >= 0");
  if (o.draft_rows < 1) return InvalidArgumentError("mulo.draft_rows: must be >= 1");
  return OkStatus();
}

double TheoreticalSpeedup(double acceptance, int64_t target_tokens, int64_t drafter_tokens) {
  const double tp = static_cast<double>(target_tokens);
  return tp / ((1.0 - acceptance) * tp + static_cast<double>(drafter_tokens));
}

StatusOr<DecodeResult> MuloDecoder::Decode(const DecodeRequest& request, const ModelSet& models,
                                           ProgressSink& progress,
                                           const CancelToken& cancel) const {
  if (models.target == nullptr || models.drafter == nullptr || models.upsampler == nullptr ||
      models.downsampler == nullptr || models.neighbors == nullptr) {
    return FailedPreconditionError(
        "mulo: the model family needs a drafter, an up-sampler and a down-sampler");
  }
  MULO_RETURN_IF_ERROR(ValidateMuloOptions(options_));
  const SamplingParams& sampling = request.sampling;
  MULO_RETURN_IF_ERROR(ValidateSamplingParams(sampling, models.target->config().vocab_size));
  const int64_t grid = models.target->config().grid_size;
  const int64_t small = models.drafter->config().grid_size;
  const int64_t r = models.upsampler->config().factor;
  if (small * r != grid || models.downsampler->config().factor != r) {
    return FailedPreconditionError("mulo: drafter grid x factor != target grid");
  }
  return GuardTorch("mulo", [&]() -> StatusOr<DecodeResult> {
    torch::NoGradGuard no_grad;
    const auto start = std::chrono::steady_clock::now();
    const auto device = models.target->options().device();
    const int64_t batch = CfgBatch(sampling);
    const int64_t n_total = grid * grid;
    DecodeResult result;
    Stats& stats = result.stats;
    auto guided = [&](const torch::Tensor& logits) {
      return GuidedLogits(logits, sampling.cfg_scale);
    };
    auto draw = [&](const torch::Tensor& logits, Rng& rng) {  // logits [batch, V]
      return SampleToken(guided(logits), sampling, rng);
    };

    Stream target{models.target.get(),
                  models.target->NewCache(batch, models.target->config().max_positions()), {}, {}};
    Stream drafter{models.drafter.get(),
                   models.drafter->NewCache(batch, models.drafter->config().max_positions()), {},
                   {}};
    target.cache.set_trace(request.trace);
    drafter.cache.set_trace(request.trace);
    {
      PhaseTimer timer(&stats, Phase::kPrefill, device);
      MULO_ASSIGN_OR_RETURN(torch::Tensor tc,
                            models.target->EmbedCondition(request.condition, batch == 2));
      MULO_ASSIGN_OR_RETURN(torch::Tensor dc,
                            models.drafter->EmbedCondition(request.condition, batch == 2));
      MULO_ASSIGN_OR_RETURN(ForwardOutput to,
                            models.target->Prefill(target.cache, tc, LogitsMode::kLast));
      MULO_ASSIGN_OR_RETURN(ForwardOutput dout,
                            models.drafter->Prefill(drafter.cache, dc, LogitsMode::kLast));
      target.next_logits = to.logits.select(1, 0);
      drafter.next_logits = dout.logits.select(1, 0);
      ++stats.target_forward_passes;
      ++stats.draft_forward_passes;
    }
    Rng target_rng(sampling.seed, RngStream::kTarget);
    Rng drafter_rng(sampling.seed, RngStream::kDrafter);
    RowEmitter rows(grid, &progress);
    std::vector<int64_t> x;  // committed target tokens
    x.reserve(n_total);
    // DraftPrefix::kKeepDrafted: the drafter's own tokens of the leading low-resolution rows
    // whose target rows were committed exactly as U_r drafted them.
    std::vector<int64_t> kept;

    while (static_cast<int64_t>(x.size()) < n_total) {
      MULO_RETURN_IF_ERROR(cancel.Check());
      const int64_t n = static_cast<int64_t>(x.size());
      const int64_t committed_rows = n / grid;  // a multiple of r
      const int64_t prefix_small_rows = committed_rows / r;
      const int64_t draft_rows = std::min(options_.draft_rows, small - prefix_small_rows);

      // (7) D_r: the drafter's prefix from the committed target rows; keep the drafter's
      // cache up to the first token that changed.
      std::vector<int64_t> y = kept;
      if (static_cast<int64_t>(kept.size()) < prefix_small_rows * small) {
        PhaseTimer timer(&stats, Phase::kDownsample, device);
        MULO_ASSIGN_OR_RETURN(std::vector<int64_t> down,
                              models.downsampler->Apply(x, committed_rows, grid));
        y.insert(y.end(), down.begin() + kept.size(), down.end());  // D_r is row-causal
      }
      {
        PhaseTimer timer(&stats, Phase::kDraft, device);
        size_t same = 0;
        while (same < y.size() && same < drafter.fed.size() && y[same] == drafter.fed[same]) {
          ++same;
        }
        // The drafter fed what it drafted; D_r may disagree from some token on. Rows up to
        // there stay; from there the cache is recomputed (which also refreshes next_logits).
        if (same < drafter.fed.size()) {
          // Re-feed at least the prefix's last token, so next_logits is recomputed too.
          if (same == y.size() && same > 0) --same;
          MULO_RETURN_IF_ERROR(drafter.Truncate(same));
        }
        MULO_RETURN_IF_ERROR(drafter.Feed(y, same, y.size(), &stats, true));
        // (1) Sample draft_rows full drafter rows.
        std::vector<int64_t> drafted = y;
        const int64_t draft_end = (prefix_small_rows + draft_rows) * small;
        for (int64_t j = static_cast<int64_t>(y.size()); j < draft_end; ++j) {
          drafted.push_back(draw(drafter.next_logits, drafter_rng));
          if (j + 1 < small * small) {
            MULO_RETURN_IF_ERROR(drafter.Feed(drafted, j, j + 1, &stats, true));
          }
        }
        y.swap(drafted);
      }
      // (2) U_r: r x draft_rows target rows (the prefix rows give the row-causal context).
      std::vector<int64_t> drafts;
      {
        PhaseTimer timer(&stats, Phase::kUpsample, device);
        const int64_t small_rows = prefix_small_rows + draft_rows;
        MULO_ASSIGN_OR_RETURN(std::vector<int64_t> up,
                              models.upsampler->Apply(y, small_rows, small));
        drafts.assign(up.begin() + n, up.end());
      }
      const int64_t length = static_cast<int64_t>(drafts.size());
      const int64_t end = n + length;
      std::vector<int64_t> seq = x;
      seq.insert(seq.end(), drafts.begin(), drafts.end());

      // (3) One target forward scores all L drafts; (4) pooled acceptance.
      std::vector<int64_t> resample;
      torch::Tensor verify_logits;  // [batch, length, V]: position n + i at index i
      {
        PhaseTimer timer(&stats, Phase::kVerify, device);
        // Feed drafts [n, end - 1) and, when a next position exists, the last one too.
        const int64_t feed_to = end < n_total ? end : end - 1;
        torch::Tensor first = target.next_logits.unsqueeze(1);
        torch::Tensor rest;
        if (feed_to > n) {
          MULO_ASSIGN_OR_RETURN(rest, FeedTokens(*models.target, target.cache, seq, n, feed_to,
                                                 LogitsMode::kAll));
          target.fed.insert(target.fed.end(), seq.begin() + n, seq.begin() + feed_to);
          ++stats.target_forward_passes;
        }
        auto all = rest.defined() ? torch::cat({first, rest}, 1) : first;
        verify_logits = all.narrow(1, 0, length);
        if (end < n_total) target.next_logits = all.select(1, length);
        ++stats.verify_steps;
        auto guided_all = GuidedLogits(verify_logits, sampling.cfg_scale);  // [length, V]
        auto probs = ToProbabilities(guided_all, sampling);
        auto tokens = torch::tensor(drafts, torch::kInt64);
        auto pooled = PooledProbability(probs, tokens, *models.neighbors,
                                        std::min(options_.k, models.neighbors->max_neighbors() + 1),
                                        options_.delta)
                          .to(torch::kCPU);
        std::vector<int64_t> rejected;
        for (int64_t i = 0; i < length; ++i) {
          if (!(pooled[i].item<float>() >= options_.tau)) rejected.push_back(n + i);
        }
        // (5) Expand rejections locally (or raster-scan).
        resample = ExpandRejections(rejected, n, end, grid, options_.radius, options_.rejection);
      }
      stats.drafted_tokens += length;
      stats.accepted_tokens += length - static_cast<int64_t>(resample.size());
      stats.resampled_tokens += static_cast<int64_t>(resample.size());

      // (6) Re-sample R_X in raster order with the target, refreshing the cache for the chunk
      // since the previous re-sampled position.
      if (!resample.empty()) {
        PhaseTimer timer(&stats, Phase::kResample, device);
        const int64_t t0 = resample.front();
        MULO_RETURN_IF_ERROR(target.Truncate(t0));
        // The verify forward already gave t0's distribution (its prefix is unchanged).
        torch::Tensor logits = verify_logits.select(1, t0 - n);
        int64_t valid_until = t0;  // cache rows hold seq[0, valid_until)
        for (size_t idx = 0; idx < resample.size(); ++idx) {
          MULO_RETURN_IF_ERROR(cancel.Check());
          const int64_t u = resample[idx];
          if (u > valid_until) {
            MULO_RETURN_IF_ERROR(target.Feed(seq, valid_until, u, &stats, false));
            logits = target.next_logits;
            valid_until = u;
          }
          seq[u] = draw(logits, target_rng);
        }
        // Catch the cache up with the tail after the last re-sampled position (its new token
        // included) and get the next step's first distribution; nothing follows the last row.
        if (end < n_total) MULO_RETURN_IF_ERROR(target.Feed(seq, valid_until, end, &stats, false));
      }
      if (options_.prefix == DraftPrefix::kKeepDrafted &&
          static_cast<int64_t>(kept.size()) == prefix_small_rows * small) {
        // Extend over the new low-resolution rows while their r target rows are unchanged.
        int64_t row = prefix_small_rows;
        for (; row < prefix_small_rows + draft_rows; ++row) {
          const int64_t from = row * r * grid;
          const int64_t to = from + r * grid;
          if (!std::equal(seq.begin() + from, seq.begin() + to, drafts.begin() + (from - n))) {
            break;
          }
        }
        kept.assign(y.begin(), y.begin() + row * small);
      }
      x.assign(seq.begin(), seq.begin() + end);
      std::vector<int32_t> committed(x.begin(), x.end());
      rows.Commit(committed);
    }
    result.tokens.assign(x.begin(), x.end());
    stats.tokens = n_total;
    stats.total_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  });
}

}  // namespace mulo::engine
