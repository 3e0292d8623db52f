// One request's decoding state, shared by every method, so that a method's file holds only its
// algorithm: the guidance batch, one stream per model (its KV cache, what it has been fed and
// the logits predicting the next token), the request's random streams, the committed tokens
// and the rows streamed from them, the phase timers and the Stats, and cancellation.
//
// Methods are step functions over a session (SteppedMethod): Begin opens the streams a method
// needs, each Step advances the image by one draft-and-verify round (or one token), and the
// session finishes the result, so a method's file holds only its algorithm. On a server each
// request decodes as a fiber of its worker's engine loop (engine_loop.h), which steps every
// session and runs their forwards as one batched forward per model (docs/design.md).
#ifndef MULO_ENGINE_DECODE_SESSION_H_
#define MULO_ENGINE_DECODE_SESSION_H_

#include <torch/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/commit_map.h"
#include "engine/decode/decoding_method.h"
#include "engine/decode/engine_loop.h"
#include "engine/model/token_model.h"
#include "engine/model/tree_verify_graphs.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/uniform_cache.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

// Whose forwards a stream's calls count as (Stats::target_forward_passes or
// draft_forward_passes).
enum class StreamRole { kTarget, kDraft };

// One model's view of the image being decoded: its KV cache holds the condition positions and
// then the raster tokens in fed(), in order, except while a masked set (a tree, a window) sits
// after them waiting for Keep.
class ModelStream {
 public:
  // `cache`: an empty cache of the model (its own, or a pool's slots). With a `loop`, every
  // forward of the stream runs inside its batches.
  ModelStream(const TokenModel& model, KvCache cache, StreamRole role, Stats* stats,
              ForwardTrace* trace, EngineLoop* loop = nullptr);

  const TokenModel& model() const { return model_; }
  KvCache& cache() { return cache_; }
  // Raster tokens whose rows are in the cache, in raster order.
  const std::vector<int64_t>& fed() const { return fed_; }
  // [batch, V]: the logits predicting raster position fed().size().
  const torch::Tensor& next_logits() const { return next_logits_; }
  // [batch, dim]: the final-norm feature next_logits() was read out of (the target feature an
  // EAGLE-style head continues from).
  const torch::Tensor& next_hidden() const { return next_hidden_; }

  // Runs the condition positions (embedded once); next_logits() then predicts token 0.
  Status Prefill(const torch::Tensor& condition_embeddings);

  // Appends tokens[from, to) at their raster positions (from must equal fed().size()), the
  // same ids in every stream of the batch. Returns the logits [batch, to - from, V] with
  // LogitsMode::kAll, [batch, 1, V] with kLast; next_logits() moves to position `to`.
  StatusOr<torch::Tensor> Feed(const std::vector<int64_t>& tokens, int64_t from, int64_t to,
                               LogitsMode mode = LogitsMode::kLast);

  // Appends an arbitrary set of tokens after the cached rows: ids[i] at raster position
  // positions[i], row i attending where mask[i] ([n, cache rows + n] bool) is true: a draft
  // tree, a Jacobi window, rows advancing in parallel. fed() is unchanged until Keep.
  StatusOr<ForwardOutput> FeedSet(const std::vector<int64_t>& ids,
                                  const std::vector<int64_t>& positions, const torch::Tensor& mask,
                                  LogitsMode mode = LogitsMode::kAll);

  // FeedSet for a set chosen on the device (a draft tree grown there): ids int64 [n] and raster
  // positions int64 [n] on the model's device, neither range-checked nor read back (the
  // engine made them), so that the forward follows the drafting with no host read between.
  StatusOr<ForwardOutput> FeedSetOnDevice(const torch::Tensor& ids, const torch::Tensor& positions,
                                          const torch::Tensor& mask,
                                          LogitsMode mode = LogitsMode::kAll);

  // Keeps exactly the cache rows `rows` (strictly increasing; the condition rows and the
  // committed prefix first, then e.g. an accepted tree path) and records `tokens` as fed.
  Status Keep(const std::vector<int64_t>& rows, std::vector<int64_t> tokens);

  // Appends one token the engine drew on the device (int64 [1] there, from
  // DecodeSession::DrawOnDevice) at raster position fed().size(), without reading it back:
  // fed() holds -1 for it until ResolveDrawn records the value its caller read with the row.
  Status FeedDrawn(const torch::Tensor& token, LogitsMode mode = LogitsMode::kLast);
  // Feed for a run whose tail the engine drew on the device: tokens[from, drawn_from) from the
  // host, then drawn[0, to - drawn_from) (int64, on the device, not range-checked) at positions
  // drawn_from .. to - 1; fed() holds -1 for the drawn ones until ResolveDrawn.
  StatusOr<torch::Tensor> FeedWithDrawn(const std::vector<int64_t>& tokens, int64_t from,
                                        int64_t drawn_from, const torch::Tensor& drawn, int64_t to,
                                        LogitsMode mode = LogitsMode::kLast);
  // Records `ids` as the values of the drawn tokens at raster positions [from, from + n).
  void ResolveDrawn(int64_t from, const std::vector<int64_t>& ids);

  // Whether the next `count` tokens may be drawn and fed by one replay of the pool's row
  // graphs (row_graphs.h: `count` is their row length, the cache a two-stream pool view and
  // `sampling` without filters).
  bool CanFeedRow(int64_t count, const SamplingParams& sampling) const;
  // Draws the next row's tokens from next_logits() onwards and feeds every one of them (the
  // image's last included), in one replay, inside the loop's next batch of rows when there is
  // a loop: step j's token is the one DecodeSession::DrawOnDevice gives with uniforms[j]
  // (float64 [count] on the device; undefined when greedy), as CanFeedRow allows. Returns the
  // `count` ids, read back in the row's one host read (the batch's, counted as the request's
  // own); next_hidden() is left undefined (a row keeps no hidden state: ar never reads it).
  StatusOr<std::vector<int64_t>> DrawAndFeedRow(const torch::Tensor& uniforms,
                                                const SamplingParams& sampling, int64_t count);
  // The same from the pool's row graphs that leave the row on the device (RowGraphs::Shape::
  // read false: MuLo-SD's drafter rows): the `count` ids int64 [count] there, no read; fed()
  // holds -1 for them until ResolveDrawn.
  bool CanFeedRowOnDevice(int64_t count, const SamplingParams& sampling) const;
  StatusOr<torch::Tensor> DrawAndFeedRowOnDevice(const torch::Tensor& uniforms,
                                                 const SamplingParams& sampling, int64_t count);

  // Whether a chain drafter may feed the `committed` tokens it has not been fed (1 ..
  // RowGraphs::kMaxPrefix of them) and draft `count` tokens from there in one replay of its
  // pool's chain graphs (row_graphs.h, Shape::drafts), as `sampling` allows.
  bool CanDraftChain(int64_t count, int64_t committed, const SamplingParams& sampling) const;
  // That replay, inside the loop's next batch of chains when there is a loop: feeds
  // committed[fed().size(), end), then draws `count` drafts, feeding all but the last; draft j
  // is the one ChainProposer draws with uniforms[j] (float64 [count] on the device; undefined
  // when greedy). Nothing is read back: the drafts and their q stay on the device (Output::
  // drafts, probabilities) and fed() holds -1 for the fed drafts until ResolveDrawn.
  StatusOr<RowGraphs::Output> DraftChain(const std::vector<int64_t>& committed,
                                         const torch::Tensor& uniforms,
                                         const SamplingParams& sampling, int64_t count);
  // Whether a target may verify a chain of `shape` in one replay of its pool's verify graphs
  // (verify_graphs.h), as `sampling` allows.
  bool CanVerifyChain(const VerifyGraphs::Shape& shape, const SamplingParams& sampling) const;
  // That replay and its one read, inside the loop's next batch of verifications when there is
  // a loop: feeds call.last_token at fed().size() and the call's drafts after it, and judges
  // them (the call's cache and positions are this stream's). fed() then holds the token and
  // every draft; the caller truncates to what it keeps.
  StatusOr<VerifyGraphs::Output> VerifyChain(const VerifyGraphs::Shape& shape,
                                             VerifyGraphs::Call call);

  // Whether this stream's forwards wait in an engine loop's queue, where other requests'
  // replays (of graphs whose outputs a call may view) run before them.
  bool queued() const { return loop_ != nullptr; }
  // Whether a target may verify a draft tree of `nodes` drafts at most `max_depth` deep in one
  // replay of `graphs` (tree_verify_graphs.h: a pool's, for EAGLE-2's trees), as `sampling`
  // allows.
  bool CanVerifyTree(const TreeVerifyGraphs& graphs, int64_t nodes, int64_t max_depth,
                     const SamplingParams& sampling) const;
  // That replay and its one read, inside the loop's next batch of tree verifications when
  // there is a loop (the call's tensors must then be its own: other requests' replays run
  // first, queued()): feeds call.root_token at fed().size() and the tree's nodes after it at
  // their depths, and judges them (the call's cache and position are this stream's). fed()
  // then holds the root and every node; the caller keeps the path (Keep).
  StatusOr<TreeVerifyGraphs::Output> VerifyTree(const TreeVerifyGraphs& graphs,
                                                TreeVerifyGraphs::Call call);

  // Whether a target may verify MuLo-SD's step after the `committed` tokens (the image's so
  // far) in one replay of `graphs` (mulo_verify_graphs.h), as `sampling` allows.
  bool CanVerifyMulo(const MuloVerifyGraphs& graphs, const std::vector<int64_t>& committed,
                     const SamplingParams& sampling) const;
  // That replay and its one read, inside the loop's next batch of MuLo-SD verifications when
  // there is a loop. Its tail is the committed tokens this stream lacks, or, when it lacks
  // none, the last one again (its row is rewritten), so that the replay makes the first
  // draft's logits; only the first step, with nothing committed, takes next_logits(). The
  // call's cache, tail, first logits and positions are this stream's. fed() then holds every
  // committed token and -1 for each draft until ResolveDrawn.
  // With step graphs (MuloVerifyGraphs::Shape::draft) the same replay draws and feeds the
  // `drafter`'s next row first, as call.drafter's numbers and sampling say (its cache, logits,
  // prefix and positions are the drafter's): the drafter's fed() then holds -1 for the row
  // until ResolveDrawn, and its next_logits() are those after the row.
  StatusOr<MuloVerifyGraphs::Output> VerifyMulo(const MuloVerifyGraphs& graphs,
                                                const std::vector<int64_t>& committed,
                                                MuloVerifyGraphs::Call call,
                                                ModelStream* drafter = nullptr);
  // Whether this stream (MuLo-SD's drafter) may draw its next row inside a replay of the step
  // graphs `graphs` with `sampling`: every token it was fed is known, its next logits are
  // there, and the row fits (MuloVerifyGraphs::FitsDrafter).
  bool CanDraftMuloRow(const MuloVerifyGraphs& graphs, const SamplingParams& sampling) const;

  // Whether a target may run a ZipAR forward of `inputs` tokens in one replay of `graphs`
  // (zipar_graphs.h), as `sampling` allows.
  bool CanStepZipAr(const ZipArGraphs& graphs, int64_t inputs,
                    const SamplingParams& sampling) const;
  // That replay and its one read, inside the loop's next batch of ZipAR forwards when there is
  // a loop; the call's cache, condition rows and position offset are this stream's. As
  // FeedSet, it leaves fed() alone (ZipAR's cache is not in raster order).
  StatusOr<ZipArGraphs::Output> StepZipAr(const ZipArGraphs& graphs, ZipArGraphs::Call call);
  // Whether the forwards of `chain` (MuLo-SD's drafter's wavefront, planned ahead) may run in
  // one replay of `graphs`, each given this stream's cache, condition rows and position offset.
  bool CanStepZipArChain(const ZipArGraphs& graphs, ZipArGraphs::Chain chain);
  // That replay (and its read, if a forward asks), the same way; each forward counts as one of
  // this stream's. The caller drops the last forward's placeholders.
  StatusOr<ZipArGraphs::Output> StepZipArChain(const ZipArGraphs& graphs, ZipArGraphs::Chain chain);

  // Rolls back to the first n raster tokens (their next_logits are stale until the next Feed).
  Status Truncate(int64_t n);

  // Cache rows before raster token 0 (fewer than cls_token_num for a shortened caption).
  int64_t condition_rows() const { return condition_rows_; }

 private:
  // Gives `chain`'s forwards this stream's cache, condition rows and position offset; false
  // when the model's raster positions are not consecutive.
  bool AdoptZipArChain(ZipArGraphs::Chain& chain);
  void CountForward();
  // The first committed token VerifyMulo feeds (its tail's start).
  int64_t MuloTailStart(int64_t committed) const;
  // The row graphs' replay behind DrawAndFeedRow(OnDevice), `count` rows fed.
  StatusOr<RowGraphs::Output> FeedRow(const torch::Tensor& uniforms,
                                      const SamplingParams& sampling, int64_t count);
  // The causal append of `input` [batch, n] at raster positions [at, at + n): inside the
  // loop's next batch with a loop, else directly (where a GPU model may replay a captured
  // graph over a cache of the request's own). `drawn`: ids drawn on the device, whose range check would read
  // them back. Moves next_logits() / next_hidden() to the last row; fed() is the caller's.
  StatusOr<ForwardOutput> Append(const torch::Tensor& input, int64_t at, bool drawn,
                                 LogitsMode mode);
  // Forward through the cache, inside the loop's next batch when there is one.
  StatusOr<ForwardOutput> RunForward(const torch::Tensor& embeddings,
                                     const torch::Tensor& positions, const torch::Tensor& mask,
                                     LogitsMode mode);

  const TokenModel& model_;
  EngineLoop* loop_;
  KvCache cache_;
  StreamRole role_;
  Stats* stats_;
  int64_t condition_rows_ = 0;
  std::vector<int64_t> fed_;
  torch::Tensor next_logits_;
  torch::Tensor next_hidden_;
};

class DecodeSession {
 public:
  // Checks that the family has a target and that the sampling parameters are valid for it
  // (INVALID_ARGUMENT naming the field), and starts the clock. `method` names errors.
  static StatusOr<std::unique_ptr<DecodeSession>> Start(const std::string& method,
                                                        const DecodeRequest& request,
                                                        const ModelSet& models,
                                                        ProgressSink& progress,
                                                        const CancelToken& cancel);

  const ModelSet& models() const { return models_; }
  const SamplingParams& sampling() const { return request_.sampling; }
  bool greedy() const { return request_.sampling.temperature == 0.0; }
  torch::Device device() const { return models_.target->options().device(); }
  int64_t grid() const { return models_.target->grid_size(); }
  int64_t num_tokens() const { return grid() * grid(); }
  Stats& stats() { return stats_; }

  // A stream of `model` (embeds the condition once for it and prefills, timed as the prefill
  // phase); owned by the session. The target's stream has the target role. It runs the
  // unconditional half when `sampling` (the request's when null) asks for guidance.
  StatusOr<ModelStream*> Open(const TokenModel& model, StreamRole role,
                              const SamplingParams* sampling = nullptr);

  // An empty cache of `batch` streams: from the request's reserved slots when it has them,
  // else of its own with `capacity` rows (which it grows past as needed).
  KvCache NewCache(const TokenModel& model, int64_t batch, int64_t capacity);
  KvCache NewCache(const EagleHead& head, int64_t batch, int64_t capacity);

  // The EAGLE head's forward (EagleHead::Forward) and a resampler's (Resampler::Apply, h x w
  // ids on the host in, the output grid's ids out): inside the loop's next batch when the
  // request has one, at once otherwise. Same results either way (engine_loop.h).
  StatusOr<torch::Tensor> RunHead(const EagleHead& head, const HeadCall& call);
  // A draft tree grown by the worker's drafting graphs (EagleTreeGraphs::Run), inside the
  // loop's next batch of drafting replays when the request has a loop (the call's tensors
  // must then be its own), at once otherwise.
  StatusOr<EagleTreeGraphs::Draft> DraftTree(const EagleTreeGraphs& graphs,
                                             const EagleTreeGraphs::Call& call);
  StatusOr<std::vector<int64_t>> Resample(const Resampler& resampler,
                                          const std::vector<int64_t>& ids, int64_t h, int64_t w);
  // The same for ids drawn on the device (int64 [h * w], not range-checked): U_r's ids out
  // [H * W], left on the device, no host read.
  StatusOr<torch::Tensor> ResampleDrawn(const Resampler& resampler, const torch::Tensor& ids,
                                        int64_t h, int64_t w);

  // The worker's KV-cache slots reserved for the request (and the graphs captured over them
  // at load), or null.
  const KvReservation* reservation() const { return request_.kv; }

  Rng& rng(RngStream stream) { return rngs_[static_cast<int>(stream)]; }
  // The stream's numbers on the session's device, made a block at a time (uniform_cache.h).
  UniformCache& uniforms(RngStream stream);
  // The stream's next `count` numbers for draws under `sampling` (the request's when null), on
  // the device; none (undefined) when it is greedy, whose draws take the argmax and read none.
  torch::Tensor DrawNumbers(RngStream stream, int64_t count,
                            const SamplingParams* sampling = nullptr);
  // The acceptance and target streams for a verifier, with their device numbers, and the
  // request's loop as the judge of its chains (batched with other requests').
  VerifierRngs verifier_rngs();
  // Probabilities [..., V] of logits [batch, ..., V]: guidance, then temperature / top-k /
  // top-p, exactly as every draw sees them (the request's, or `sampling`).
  torch::Tensor Probabilities(const torch::Tensor& logits) const;
  torch::Tensor Probabilities(const torch::Tensor& logits, const SamplingParams& sampling) const;
  // What tree methods rank drafts by and relaxed rules pool: the request's probabilities,
  // except at temperature 0 the guided distribution untempered and unfiltered (the request's
  // own is one-hot there, which would leave a tree one child per node and nothing to pool;
  // its argmax is the same).
  torch::Tensor RankingProbabilities(const torch::Tensor& logits) const;
  // A token from logits [batch, V] with `stream` (argmax at temperature 0, no randomness),
  // guided and tempered as the request asks, or as `sampling` when a stream has its own.
  int64_t Draw(const torch::Tensor& logits, RngStream stream);
  int64_t Draw(const torch::Tensor& logits, RngStream stream, const SamplingParams& sampling);

  // A token drawn where the logits are, with no host read: int64 [1] on the logits' device.
  // With `uniform` (float64 [1], the stream's n-th number, from uniforms(stream)) it is the token
  // Draw(logits, stream) gives as the stream's n-th draw, so a method that draws each position
  // once, in order, from one stream (ar) may use either. Inside the loop's next batched draw
  // when the request has a loop (the same token: engine_loop.h), at once otherwise.
  StatusOr<torch::Tensor> DrawOnDevice(const torch::Tensor& logits, const torch::Tensor& uniform);
  // The same with `sampling` (a stream with its own, as Draw's overload).
  StatusOr<torch::Tensor> DrawOnDevice(const torch::Tensor& logits, const torch::Tensor& uniform,
                                       const SamplingParams& sampling);
  // Tokens for k positions at once, with no host read: logits [batch, k, V] in, int64 [k] on
  // their device out. Position j takes `stream`'s next number in order (none when greedy), so
  // they are the tokens k calls of Draw(logits[:, j], stream) would give.
  torch::Tensor DrawRowsOnDevice(const torch::Tensor& logits, RngStream stream);

  // A device tensor's values on the host (token ids; or the tensor in `dtype`): inside the
  // loop's next batched read when the request has a loop (one transfer for every waiting
  // request: host_read.h's HostReader), at once otherwise; one read of the request's either way.
  StatusOr<std::vector<int64_t>> ReadIds(const torch::Tensor& tensor);
  StatusOr<torch::Tensor> ReadHost(const torch::Tensor& tensor, torch::ScalarType dtype);

  // Times a scope as `phase` (waiting for the GPU at its end when the request asks for
  // synchronize_phases).
  PhaseTimer Time(Phase phase) {
    return PhaseTimer(&stats_, phase, device(), request_.synchronize_phases);
  }
  Status CheckCancelled() const { return cancel_.Check(); }

  // The committed raster prefix; newly completed rows are streamed in order.
  const std::vector<int64_t>& committed() const { return committed_; }
  void Commit(std::vector<int64_t> tokens);
  void Append(int64_t token);
  // Rows committed out of raster order (rows advancing in parallel): `grid_tokens` holds the
  // whole grid, `row_done[r]` whether row r is final; rows stream in order as soon as every
  // row before them is final too.
  void CommitRows(const std::vector<int64_t>& grid_tokens, const std::vector<bool>& row_done);
  bool done() const { return static_cast<int64_t>(committed_.size()) >= num_tokens(); }
  // How each token was committed (commit_map.h): a method marks its kept drafts and re-draws
  // as it commits them; the rest are the target's own. Finish puts it in the Stats.
  CommitMap& commit_map() { return commit_map_; }

  // The tokens and the Stats (token count, total seconds).
  DecodeResult Finish();

 private:
  DecodeSession(const DecodeRequest& request, const ModelSet& models, ProgressSink& progress,
                const CancelToken& cancel);
  void EmitRows();  // streams the rows the committed prefix completed since the last call

  const DecodeRequest& request_;
  const ModelSet& models_;
  const CancelToken& cancel_;
  RowEmitter rows_;
  Stats stats_;
  std::array<Rng, 3> rngs_;
  std::array<std::unique_ptr<UniformCache>, 3> uniform_caches_;  // made on first use
  std::vector<std::unique_ptr<ModelStream>> streams_;
  std::vector<int64_t> committed_;
  CommitMap commit_map_;
  std::chrono::steady_clock::time_point start_;
};

// A decoding method written as a step function over a session. Decode runs Validate, starts
// the session, Begin, then Step until the image is complete, checking cancellation before
// every step; torch errors become INTERNAL statuses naming the method.
class SteppedMethod : public DecodingMethod {
 public:
  // One method's per-request state.
  class State {
   public:
    virtual ~State() = default;
    // Advances the image; the session is done() when the last token is committed.
    virtual Status Step(DecodeSession& session) = 0;
  };

  StatusOr<DecodeResult> Decode(const DecodeRequest& request, const ModelSet& models,
                                ProgressSink& progress, const CancelToken& cancel) const final;

  // The family has what the method needs (FAILED_PRECONDITION otherwise) and its options are
  // valid (INVALID_ARGUMENT naming the field).
  virtual Status Validate(const ModelSet& models) const = 0;

 protected:
  virtual StatusOr<std::unique_ptr<State>> Begin(DecodeSession& session) const = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_SESSION_H_
