#include "engine/decode/mulo.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "engine/core/device_upload.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/mulo_proposer.h"
#include "engine/decode/mulo_verify_graphs.h"
#include "engine/sampling/pooled_threshold_verifier.h"
#include "engine/sampling/token_draw.h"

namespace mulo::engine {
namespace {

class MuloState : public SteppedMethod::State {
 public:
  MuloState(ModelStream* target, ModelStream* drafter, const MuloOptions& options,
            const SamplingParams& draft_sampling, const ModelSet& models)
      : target_(target),
        proposer_(drafter, options, draft_sampling, models),
        verifier_(options.tau, options.pooling, *models.neighbors),
        options_(options) {}

  Status Step(DecodeSession& session) override {
    Stats& stats = session.stats();
    const int64_t n = static_cast<int64_t>(session.committed().size());
    const int64_t grid = session.grid();
    std::vector<int64_t> seq = session.committed();
    std::vector<int64_t> resample;
    torch::Tensor verify_logits;  // [batch, L, V]: position n + i at index i (eager steps)
    const bool on_device = ResamplesOnDevice();  // always so where there are graphs
    Judged judged;
    if (const MuloVerifyGraphs* step = StepGraphsFor(session); step != nullptr) {
      // (1)-(6) in one replay of the step graphs and its one read.
      auto timer = session.Time(Phase::kVerify);
      MULO_ASSIGN_OR_RETURN(judged, StepOnGraphs(session, *step));
    } else if (const MuloVerifyGraphs* up = UpsampleGraphsFor(session); up != nullptr) {
      // (1) the drafter's rows apart, left on the device; (2)-(6) in one replay of the graphs
      // that up-sample them and its one read.
      MULO_ASSIGN_OR_RETURN(judged, UpsampleOnGraphs(session, *up));
    } else {
      // (1), (2): drafter rows after its prefix, U_r: L target drafts after the committed
      // rows, all on the device until the step's one read below.
      MULO_ASSIGN_OR_RETURN(MuloProposer::Proposal proposal, proposer_.Propose(session));
      auto timer = session.Time(Phase::kVerify);
      MULO_ASSIGN_OR_RETURN(judged, Verify(session, proposal, on_device, &verify_logits));
    }
    const int64_t length = static_cast<int64_t>(judged.drafts.size()), end = n + length;
    {
      auto timer = session.Time(Phase::kVerify);
      ++stats.verify_steps;
      proposer_.Resolve(judged.drafter_ids, judged.drafts);
      target_->ResolveDrawn(n, judged.drafts);
      seq.insert(seq.end(), judged.drafts.begin(), judged.drafts.end());
      const Verdict verdict = verifier_.Judge(judged.pooled, judged.own);
      // (5) Local (or raster) expansion of the rejections.
      std::vector<int64_t> rejected;
      for (int64_t i : verdict.rejected) rejected.push_back(n + i);
      resample = ExpandRejections(rejected, n, end, grid, options_.radius, options_.rejection);
      if (on_device) MULO_RETURN_IF_ERROR(TakeRedrawn(session, resample, judged, n, &seq));
      stats.relaxed_accepted_tokens += MarkCommitMap(session, verdict, resample, n, length);
      stats.expansion_resampled_tokens += static_cast<int64_t>(resample.size() - rejected.size());
    }
    stats.drafted_tokens += length;
    stats.accepted_tokens += length - static_cast<int64_t>(resample.size());
    stats.resampled_tokens += static_cast<int64_t>(resample.size());
    // (6) Re-sample R_X in raster order: sequentially (the paper) or, where no earlier
    // re-sample is near, from the verify forward (parallel).
    if (!resample.empty() && !on_device) {
      auto timer = session.Time(Phase::kResample);
      MULO_RETURN_IF_ERROR(Resample(session, resample, verify_logits, n, &seq));
    }
    seq.resize(end);
    // (7) The drafter's prefix for these rows, from what was committed.
    MULO_RETURN_IF_ERROR(proposer_.Committed(session, seq));
    session.Commit(std::move(seq));
    return OkStatus();
  }

 private:
  // The step's acceptance map: the re-sampled positions are re-drawn, the others are drafts
  // kept at depth 1 (drafted at once), relaxed where only the pooled mass kept them. Returns
  // the relaxed ones (a relaxed draft that an expansion re-samples is not kept).
  static int64_t MarkCommitMap(DecodeSession& session, const Verdict& verdict,
                               const std::vector<int64_t>& resample, int64_t n, int64_t length) {
    std::vector<bool> redrawn(length, false);
    for (int64_t position : resample) redrawn[position - n] = true;
    int64_t relaxed = 0;
    for (int64_t i = 0; i < length; ++i) {
      if (redrawn[i]) {
        session.commit_map().Redrawn(n + i);
      } else {
        session.commit_map().Draft(n + i, /*depth=*/1);
      }
    }
    for (int64_t i : verdict.relaxed) {
      if (redrawn[i]) continue;
      session.commit_map().Draft(n + i, /*depth=*/1, /*relaxed=*/true);
      ++relaxed;
    }
    return relaxed;
  }

  // A step's verdict as read back: the drafter's new tokens, U_r's drafts, their pooled and own
  // probabilities (float32 values) and, where the step re-sampled on the device, its decisions
  // (each draft re-sampled or not, the step's tokens).
  struct Judged {
    std::vector<int64_t> drafter_ids, drafts;
    std::vector<double> pooled, own;
    std::vector<int64_t> resampled, tokens;
  };

  // The worker's graphs (mulo_verify_graphs.h, for the family's defaults) of a step drafting
  // `carried` drafter tokens into `drafts` target ones, drafting in the replay too (`draft`)
  // or up-sampling the drafter's rows there, where this step's verification fits them; else
  // null.
  const MuloVerifyGraphs* GraphsOf(DecodeSession& session, int64_t drafts, int64_t carried,
                                   bool draft) const {
    if (!ResamplesOnDevice() || session.reservation() == nullptr) return nullptr;
    const std::vector<int64_t>& committed = session.committed();
    if (static_cast<int64_t>(committed.size()) % session.grid() != 0) return nullptr;
    MuloVerifyGraphs::Shape shape;
    shape.drafts = drafts;
    shape.grid = session.grid();
    shape.radius = options_.radius;
    shape.rejection = options_.rejection;
    shape.pooling = options_.pooling;
    shape.carried = carried;
    shape.draft = draft;
    shape.upsample = !draft;
    const MuloVerifyGraphs* graphs =
        session.reservation()->MuloVerifyGraphsOf(*session.models().target, shape);
    return graphs != nullptr && target_->CanVerifyMulo(*graphs, committed, session.sampling())
               ? graphs
               : nullptr;
  }

  // The target's graphs that up-sample this step's drafter rows and verify them in one
  // replay, or null: the step then up-samples and verifies eagerly.
  const MuloVerifyGraphs* UpsampleGraphsFor(DecodeSession& session) {
    proposer_.PlanRows(static_cast<int64_t>(session.committed().size()));
    return GraphsOf(session, proposer_.draft_tokens(), proposer_.row_tokens(), /*draft=*/false);
  }

  // The step graphs that draft this step's rows and verify them in one replay, or null.
  const MuloVerifyGraphs* StepGraphsFor(DecodeSession& session) {
    proposer_.PlanRows(static_cast<int64_t>(session.committed().size()));
    const MuloVerifyGraphs* graphs = GraphsOf(session, proposer_.draft_tokens(),
                                              proposer_.row_tokens(), /*draft=*/true);
    return graphs != nullptr && proposer_.FitsStepGraphs(*graphs) ? graphs : nullptr;
  }

  // The whole step from the step graphs: the drafter's row with the drafter stream's numbers,
  // U_r, then the verification (RunGraphs).
  StatusOr<Judged> StepOnGraphs(DecodeSession& session, const MuloVerifyGraphs& graphs) {
    MuloVerifyGraphs::Call call;
    call.drafter = proposer_.DraftInGraphs(session);
    return RunGraphs(session, graphs, std::move(call), graphs.shape().drafts);
  }

  // The drafter's rows drawn apart (its own forwards or ZipAR's wavefront), then U_r and the
  // verification in one replay (RunGraphs).
  StatusOr<Judged> UpsampleOnGraphs(DecodeSession& session, const MuloVerifyGraphs& graphs) {
    MuloVerifyGraphs::Call call;
    MULO_ASSIGN_OR_RETURN(call.carried, proposer_.DraftNewRows(session));
    call.drafter.prefix = proposer_.drafter_prefix();
    auto timer = session.Time(Phase::kVerify);
    return RunGraphs(session, graphs, std::move(call), graphs.shape().drafts);
  }

  // One replay of `graphs` for `call` (its drafts or its drafter's row set) judging `length`
  // drafts with the target stream's next numbers, and its one read.
  StatusOr<Judged> RunGraphs(DecodeSession& session, const MuloVerifyGraphs& graphs,
                             MuloVerifyGraphs::Call call, int64_t length) {
    if (!session.greedy()) {
      call.redraw_uniforms = session.uniforms(RngStream::kTarget).Peek(length);
    }
    call.sampling = session.sampling();
    call.tau = options_.tau;
    MULO_ASSIGN_OR_RETURN(MuloVerifyGraphs::Output out,
                          target_->VerifyMulo(graphs, session.committed(), std::move(call),
                                              proposer_.drafter()));
    return Judged{std::move(out.carried), std::move(out.drafts), std::move(out.pooled),
                  std::move(out.own),     std::move(out.resampled), std::move(out.tokens)};
  }

  // (3) One target forward scores all L drafts (the last one only when a row follows). The
  // tokens after the last re-sampled position of the previous step ride along: their cache
  // rows are refreshed here instead of in a forward of their own. (4) Pooled acceptance
  // p(A_{k,delta}(x_i)) >= tau. The step's one read brings the drafter's new tokens, U_r's
  // drafts and their pooled and own probabilities together; (5), (6) `on_device` too, where
  // the re-samples all come from this forward: the same read then brings the step's tokens,
  // and the re-sampling after it is the host's oracle. `verify_logits`: the forward's.
  StatusOr<Judged> Verify(DecodeSession& session, const MuloProposer::Proposal& proposal,
                          bool on_device, torch::Tensor* verify_logits) {
    const int64_t n = static_cast<int64_t>(session.committed().size());
    const int64_t length = proposal.length, end = n + length, n_total = session.num_tokens();
    const std::vector<int64_t>& seq = session.committed();
    const int64_t fed = static_cast<int64_t>(target_->fed().size());
    const int64_t feed_to = end < n_total ? end : end - 1;
    if (fed == n) {
      *verify_logits = target_->next_logits().unsqueeze(1);
      if (feed_to > n) {
        MULO_ASSIGN_OR_RETURN(torch::Tensor rest,
                              target_->FeedWithDrawn(seq, n, n, proposal.drafts, feed_to,
                                                     LogitsMode::kAll));
        *verify_logits = torch::cat({*verify_logits, rest}, 1).narrow(1, 0, length);
      }
    } else {
      // Row j of the forward predicts position fed + 1 + j; position n is row n - 1 - fed.
      MULO_ASSIGN_OR_RETURN(torch::Tensor all,
                            target_->FeedWithDrawn(seq, fed, n, proposal.drafts, feed_to,
                                                   LogitsMode::kAll));
      *verify_logits = all.narrow(1, n - 1 - fed, length);
    }
    const int64_t drawn = proposal.drafter_ids.numel();
    const torch::Tensor judged =
        verifier_.PooledAndOwn(session.Probabilities(*verify_logits), proposal.drafts);
    std::vector<torch::Tensor> read = {proposal.drafter_ids.to(torch::kFloat64),
                                       proposal.drafts.to(torch::kFloat64),
                                       judged.flatten().to(torch::kFloat64)};
    if (on_device) {
      const torch::Tensor resampled =
          ExpandRejectionsOnDevice(verifier_.Kept(judged).logical_not(), n, session.grid(),
                                   options_.radius, options_.rejection);
      read.push_back(resampled.to(torch::kFloat64));
      read.push_back(
          RedrawOnDevice(session, *verify_logits, proposal.drafts, resampled).to(torch::kFloat64));
    }
    MULO_ASSIGN_OR_RETURN(const torch::Tensor host,
                          session.ReadHost(torch::cat(read), torch::kFloat64));
    // Every value read is an integer or a float32 value, exact in float64.
    const double* const value = host.data_ptr<double>();
    const auto ints = [&](int64_t from, int64_t count) {
      return std::vector<int64_t>(value + from, value + from + count);
    };
    Judged out;
    out.drafter_ids = ints(0, drawn);
    out.drafts = ints(drawn, length);
    out.pooled.assign(value + drawn + length, value + drawn + 2 * length);
    out.own.assign(value + drawn + 2 * length, value + drawn + 3 * length);
    if (on_device) {
      out.resampled = ints(drawn + 3 * length, length);
      out.tokens = ints(drawn + 4 * length, length);
    }
    return out;
  }

  // Whether a step re-samples on the device before its read: every re-sample is drawn from the
  // verify forward (parallel, radius 0), and the target runs over a pool's graphs (without,
  // the host path below runs: the oracle the graphs are tested against).
  bool ResamplesOnDevice() const {
    return options_.resample == ResampleOrder::kParallel && options_.parallel_radius == 0 &&
           target_->cache().pool() != nullptr;
  }

  // Every draft position's re-draw from the verify forward, as Resample's one run would draw
  // the positions marked in `resampled` (bool [L]): the k-th marked position takes the target
  // stream's k-th next number (peeked; TakeRedrawn moves the stream by the count). Returns the
  // step's tokens, int64 [L]: the re-draw where marked, the draft elsewhere.
  static torch::Tensor RedrawOnDevice(DecodeSession& session, const torch::Tensor& logits,
                                      const torch::Tensor& drafts,
                                      const torch::Tensor& resampled) {
    const int64_t length = drafts.size(0);
    torch::Tensor numbers;
    if (!session.greedy()) {
      const torch::Tensor rank = (resampled.to(torch::kInt64).cumsum(0) - 1).clamp_min(0);
      numbers = session.uniforms(RngStream::kTarget).Peek(length).index_select(0, rank);
    }
    const torch::Tensor drawn = DrawTokens({logits, numbers, session.sampling()});
    return torch::where(resampled, drawn, drafts);
  }

  // The device's decisions, read back (re-sampled or not, the step's tokens), checked against
  // the host's `resample` and written into `seq`; the target stream moves past the numbers the
  // re-draws took, and the target's cache back to the first re-sampled position.
  Status TakeRedrawn(DecodeSession& session, const std::vector<int64_t>& resample,
                     const Judged& decided, int64_t n, std::vector<int64_t>* seq) {
    const std::vector<int64_t>& mark = decided.resampled;
    const std::vector<int64_t>& token = decided.tokens;
    size_t next = 0;
    for (size_t j = 0; j < mark.size(); ++j) {
      const int64_t i = static_cast<int64_t>(j);
      const bool host = next < resample.size() && resample[next] == n + i;
      if (host != (mark[j] != 0)) {
        return InternalError("mulo: the device re-samples position " + std::to_string(n + i) +
                             (host ? " not" : "") + " as the host does");
      }
      if (host) ++next;
      (*seq)[n + i] = token[j];
    }
    if (resample.empty()) return OkStatus();
    if (!session.greedy()) {
      session.rng(RngStream::kTarget).Skip(static_cast<uint64_t>(resample.size()));
    }
    return target_->Truncate(resample.front());
  }

  // Draws every position of `resample` (ascending, from t0 on) from the target: from the
  // verify forward's distribution where the options allow it (FromVerifyPass), otherwise
  // conditioned on the sequence as it stands. The target is left fed up to the last position
  // it was fed for; the next verify forward feeds the rest.
  Status Resample(DecodeSession& session, const std::vector<int64_t>& resample,
                  const torch::Tensor& verify_logits, int64_t n, std::vector<int64_t>* seq) {
    MULO_RETURN_IF_ERROR(target_->Truncate(resample.front()));
    if (options_.resample == ResampleOrder::kWavefront) {
      return ResampleInWaves(session, resample, verify_logits, n, seq);
    }
    // Which positions come from the verify forward depends only on the positions before them,
    // so consecutive ones are drawn together: one device draw and one host read per run
    // (with the family default, every position of the step in one run).
    std::vector<int64_t> drawn, run;
    for (int64_t u : resample) {
      MULO_RETURN_IF_ERROR(session.CheckCancelled());
      if (FromVerifyPass(u, drawn, session.grid())) {
        run.push_back(u);
      } else {
        MULO_RETURN_IF_ERROR(DrawFromOneForward(session, run, verify_logits, n, seq));
        run.clear();
        const int64_t fed = static_cast<int64_t>(target_->fed().size());
        MULO_RETURN_IF_ERROR(target_->Feed(*seq, fed, u).status());
        (*seq)[u] = session.Draw(target_->next_logits(), RngStream::kTarget);
      }
      drawn.push_back(u);
    }
    return DrawFromOneForward(session, run, verify_logits, n, seq);
  }

  // Draws `positions` (ascending) from one forward's logits (position p at index p - n), the
  // verify forward's or a wave's, in one batch on the device, the target stream's numbers in
  // order, and reads them once.
  static Status DrawFromOneForward(DecodeSession& session, const std::vector<int64_t>& positions,
                                   const torch::Tensor& logits, int64_t n,
                                   std::vector<int64_t>* seq) {
    if (positions.empty()) return OkStatus();
    std::vector<int64_t> index;
    for (int64_t u : positions) index.push_back(u - n);
    const torch::Tensor rows = logits.index_select(
        1, Upload(torch::tensor(index, torch::kInt64), logits.device()));
    MULO_ASSIGN_OR_RETURN(const std::vector<int64_t> ids,
                          session.ReadIds(session.DrawRowsOnDevice(rows, RngStream::kTarget)));
    for (size_t j = 0; j < positions.size(); ++j) (*seq)[positions[j]] = ids[j];
    return OkStatus();
  }

  // ResampleOrder::kWavefront: the first wave from the verify forward (nothing is re-drawn
  // before it), each later one from one forward over the sequence since the previous wave.
  Status ResampleInWaves(DecodeSession& session, const std::vector<int64_t>& resample,
                         const torch::Tensor& verify_logits, int64_t n,
                         std::vector<int64_t>* seq) {
    const int64_t grid = session.grid(), window = options_.resample_window;
    std::vector<int64_t> pending = resample;
    bool first = true;
    while (!pending.empty()) {
      MULO_RETURN_IF_ERROR(session.CheckCancelled());
      // Ready: no pending position earlier in its row or within the window in a row above.
      std::vector<int64_t> wave;
      for (int64_t u : pending) {
        bool ready = true;
        for (int64_t v : pending) {
          if (v >= u) break;
          if (v / grid == u / grid || v % grid < u % grid + window) {
            ready = false;
            break;
          }
        }
        if (ready) wave.push_back(u);
      }
      torch::Tensor logits;  // [batch, positions, V]: position p at index p - offset
      int64_t offset = n;
      if (first) {
        logits = verify_logits;
      } else {
        offset = static_cast<int64_t>(target_->fed().size()) + 1;
        MULO_ASSIGN_OR_RETURN(logits, target_->Feed(*seq, offset - 1, wave.back(),
                                                    LogitsMode::kAll));
      }
      MULO_RETURN_IF_ERROR(DrawFromOneForward(session, wave, logits, offset, seq));
      if (!first) MULO_RETURN_IF_ERROR(target_->Truncate(wave.front()));
      first = false;
      std::vector<int64_t> rest;
      std::set_difference(pending.begin(), pending.end(), wave.begin(), wave.end(),
                          std::back_inserter(rest));
      pending = std::move(rest);
    }
    return OkStatus();
  }

  // Whether u's distribution may come from the verify forward, whose context holds the drafts
  // at the positions `drawn` before it. Always for the first (its prefix is unchanged).
  bool FromVerifyPass(int64_t u, const std::vector<int64_t>& drawn, int64_t grid) const {
    if (drawn.empty()) return true;
    if (options_.resample == ResampleOrder::kSequential) return false;
    for (int64_t v : drawn) {
      if (std::abs(u / grid - v / grid) <= options_.parallel_radius &&
          std::abs(u % grid - v % grid) <= options_.parallel_radius) {
        return false;
      }
    }
    return true;
  }

  ModelStream* target_;
  MuloProposer proposer_;
  PooledThresholdVerifier verifier_;
  MuloOptions options_;
};

}  // namespace

double TheoreticalSpeedup(double acceptance, int64_t target_tokens, int64_t drafter_tokens) {
  const double tp = static_cast<double>(target_tokens);
  return tp / ((1.0 - acceptance) * tp + static_cast<double>(drafter_tokens));
}

Status MuloDecoder::Validate(const ModelSet& models) const {
  if (models.target == nullptr || models.drafter == nullptr || models.upsampler == nullptr ||
      models.downsampler == nullptr || models.neighbors == nullptr) {
    return FailedPreconditionError(
        "mulo: the model family needs a drafter, an up-sampler and a down-sampler");
  }
  MULO_RETURN_IF_ERROR(ValidateMuloOptions(options_));
  const int64_t small = models.drafter->grid_size();
  if (options_.zipar_window > small) {
    return InvalidArgumentError("mulo.zipar_window: must be in [0, " + std::to_string(small) +
                                "] (the drafter's grid width is its sequential drafting)");
  }
  const int64_t r = models.upsampler->config().factor;
  if (models.drafter->grid_size() * r != models.target->grid_size() ||
      models.downsampler->config().factor != r) {
    return FailedPreconditionError("mulo: drafter grid x factor != target grid");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<SteppedMethod::State>> MuloDecoder::Begin(DecodeSession& session) const {
  const ModelSet& models = session.models();
  MULO_ASSIGN_OR_RETURN(ModelStream * target, session.Open(*models.target, StreamRole::kTarget));
  // The drafter draws with its own guidance and temperature where the options set them.
  SamplingParams draft = session.sampling();
  if (options_.draft_cfg_scale) draft.cfg_scale = *options_.draft_cfg_scale;
  if (options_.draft_temperature) draft.temperature = *options_.draft_temperature;
  MULO_ASSIGN_OR_RETURN(ModelStream * drafter,
                        session.Open(*models.drafter, StreamRole::kDraft, &draft));
  return std::unique_ptr<State>(
      std::make_unique<MuloState>(target, drafter, options_, draft, models));
}

}  // namespace mulo::engine
