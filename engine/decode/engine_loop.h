// One engine loop per worker: it steps every active request and packs the forwards they ask
// for into one batched forward per model.
//
// A request's decoding (a method's Begin and Steps over a DecodeSession) runs as a fiber on
// the loop's thread (engine/core/fiber.h). Each forward it makes of a transformer (ModelStream:
// prefill, feed, tree / window sets), of the EAGLE head (EagleProposer) or of a MuLo-SD
// resampler (DecodeSession::Resample), and each token draw it makes on the device
// (DecodeSession::DrawOnDevice: ar's tokens, MuLo-SD's drafts), and each chain its verifier
// judges (ExactVerifier through VerifierRngs::judge: speculative, SJD, GSD, MC-SJD), and each
// device -> host read it makes through the loop (DecodeSession::ReadIds, a verifier's
// VerifierRngs::reader), is queued here and the fiber pauses. A round of the loop resumes
// every request that can go on, each until it queues a call or ends; then every request is
// waiting. If any waits on a cheap call (a draw, a chain judgement, a read), the loop runs
// only those, as one batched draw (TokenDrawer::DrawBatch), one batched judgement with one
// host read for all (JudgeChainsTogether) and one batched read of every queued tensor
// (HostReadTogether), and lets their requests go on to their next forward: a request that
// queued a draw while the others queued forwards would otherwise stay half a step behind them
// for good, and no forward would carry them all. Once every request waits on a forward, the
// loop runs one batched forward per model (TokenModel::ForwardBatch, EagleHead::ForwardBatch,
// Resampler::ApplyBatch; target and drafter forwards of different requests and methods side
// by side), split where a model's rows exceed max_rows, and resumes each request with its
// result. Requests join between rounds (the Source gives the loop new ones) and leave when
// their fiber ends, so a cancelled request leaves within one step.
//
// Why fibers rather than rewriting each method as a state machine that returns its forwards:
// a method's file keeps reading like its paper's algorithm box (a forward, then the next line
// uses it). Every forward of a loop's request goes through the loop, even when the request is
// its only one: a batch of one is a plain TokenModel::Forward, so a lone request's tokens are
// those it decodes outside any loop. With CUDA graphs, every forward over a KV-cache pool's
// slots replays the pool's graphs, captured at load (pool_graphs.h), lone or batched; a cache
// of a request's own (outside a server) replays graphs only through direct causal appends
// (ForwardTokens, forward_graphs.h). Why one thread rather than a thread per request meeting
// at a rendezvous (the EngineLoop this replaces): the loop knows when every request waits,
// so no batch waits on a timer for a request busy elsewhere, and the requests' host work no
// longer contends for the cores their batched forward uses.
#ifndef MULO_ENGINE_DECODE_ENGINE_LOOP_H_
#define MULO_ENGINE_DECODE_ENGINE_LOOP_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/core/status.h"
#include "engine/decode/eagle_tree_graphs.h"
#include "engine/decode/mulo_verify_graphs.h"
#include "engine/decode/zipar_graphs.h"
#include "engine/model/eagle_head.h"
#include "engine/model/resampler.h"
#include "engine/model/resampler_graphs.h"
#include "engine/model/row_graphs.h"
#include "engine/model/token_model.h"
#include "engine/model/tree_verify_graphs.h"
#include "engine/model/verify_graphs.h"
#include "engine/sampling/chain_judge.h"
#include "engine/sampling/token_draw.h"

namespace mulo::engine {

class EngineLoop : public ChainJudge, public HostReader {
 public:
  struct Options {
    // Rows (guidance streams x new positions) per batched transformer or head forward; a
    // single call above it still runs, alone. Resampler calls and draws are not counted
    // against it.
    int64_t max_rows = 256;
    // kPerSequence: every request's tokens are exactly those it decodes alone (CPU float32);
    // kShared: fewer, larger GEMMs, equal up to the last bits (packed_gemms.h).
    PackedGemms gemms = PackedGemms::kPerSequence;
  };
  // What a batched forward ran: a transformer (target or drafter), the EAGLE head, a
  // resampler (U_r or D_r), the token sampler (draws on the device) or the chain verifier.
  // Or a batched device -> host read.
  enum class Component { kTransformer, kEagleHead, kResampler, kSampler, kVerifier, kHostRead };
  static const char* ComponentName(Component component);
  // What runs a batch of chain judgements (JudgeChainsTogether) or of reads
  // (HostReadTogether): stateless, a batch's key.
  struct ChainRule {};
  struct HostTransfer {};
  struct ReadCall {
    torch::Tensor tensor;
    torch::ScalarType dtype;
  };

  // One executed forward: of what, how many requests' calls it carried and how many rows
  // (token rows; for a resampler, the output grid positions; for the sampler, tokens drawn;
  // for the verifier, drafts judged; for a read, values read).
  struct BatchEvent {
    Component component = Component::kTransformer;
    int64_t calls = 0;
    int64_t rows = 0;
  };
  using Observer = std::function<void(const BatchEvent&)>;

  // A request as the loop runs it: a function run as a fiber, whose forwards go through Run.
  // It must catch its own errors and must not hold a lock across a forward.
  using Task = std::function<void()>;
  // Where the loop's requests come from (the server's scheduler, a test).
  class Source {
   public:
    virtual ~Source() = default;
    // The next request to start, or an empty Task for none. `active`: how many the loop is
    // stepping. With none active it may block until there is one, and an empty Task then ends
    // Serve; with some active it must answer at once.
    virtual Task Next(int active) = 0;
  };

  // Requests from a list, at most `concurrency` active at once: a finished one's place goes
  // to the next between two steps of the others (offline generation, tests, benchmarks).
  class ListSource : public Source {
   public:
    ListSource(std::vector<Task> tasks, int concurrency)
        : tasks_(std::move(tasks)), concurrency_(concurrency) {}
    Task Next(int active) override {
      if (next_ >= tasks_.size() || active >= concurrency_) return nullptr;
      return std::move(tasks_[next_++]);
    }

   private:
    std::vector<Task> tasks_;
    size_t next_ = 0;
    const int concurrency_;
  };

  explicit EngineLoop(Options options, Observer observer = nullptr);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Steps the source's requests on the calling thread until it has no more (see Source).
  // INTERNAL when a request's fiber cannot be made (its task is then dropped unrun).
  Status Serve(Source& source);

  // TokenModel::Forward(call) of `model`, run in the loop's next batched forward of that
  // model; checked first (the errors Forward returns), so a bad call never reaches a batch.
  // From outside the loop's requests it runs at once. The caller's cache must not be touched by
  // anyone else meanwhile.
  StatusOr<ForwardOutput> Run(const TokenModel& model, const ForwardCall& call);
  // EagleHead::Forward(call), the same way.
  StatusOr<torch::Tensor> Run(const EagleHead& head, const HeadCall& call);
  // Resampler::Apply(call.ids, call.h, call.w), the same way.
  StatusOr<torch::Tensor> Run(const Resampler& resampler, const ResampleCall& call);
  // ResamplerGraphs::Run({call}) (resampler_graphs.h: U_r on drawn ids), in the loop's next
  // batch of calls of the same graphs: one replay for every request waiting on one.
  StatusOr<torch::Tensor> Run(const ResamplerGraphs& graphs, const ResampleCall& call);
  // RowGraphs::Run({call}) (a whole ar row or a drafter's chain, row_graphs.h), in the loop's
  // next batch of calls of the same graphs: one replay for every request waiting on one.
  StatusOr<RowGraphs::Output> Run(const RowGraphs& rows, const RowGraphs::Call& call);
  // VerifyGraphs::Run({call}) (a speculative chain's verification, verify_graphs.h), the same
  // way; the batch's one read counts as a read of each request's own.
  StatusOr<VerifyGraphs::Output> Run(const VerifyGraphs& verify, const VerifyGraphs::Call& call);
  // MuloVerifyGraphs::Run({call}) (MuLo-SD's verification, mulo_verify_graphs.h), the same way.
  StatusOr<MuloVerifyGraphs::Output> Run(const MuloVerifyGraphs& verify,
                                         const MuloVerifyGraphs::Call& call);
  // TreeVerifyGraphs::Run({call}) (a draft tree's verification, tree_verify_graphs.h), the
  // same way: the batch's trees in one forward, its one read counted as each request's own.
  StatusOr<TreeVerifyGraphs::Output> Run(const TreeVerifyGraphs& verify,
                                         const TreeVerifyGraphs::Call& call);
  // EagleTreeGraphs::Run({call}) (a draft tree grown in one replay, eagle_tree_graphs.h), the
  // batch's requests drafting in one replay; INVALID_ARGUMENT when the call does not fit.
  StatusOr<EagleTreeGraphs::Draft> Run(const EagleTreeGraphs& graphs,
                                       const EagleTreeGraphs::Call& call);
  // ZipArGraphs::Run({call}) (a ZipAR forward and its draws, zipar_graphs.h), the same way.
  StatusOr<ZipArGraphs::Output> Run(const ZipArGraphs& graphs, const ZipArGraphs::Call& call);
  // ZipArGraphs::RunChains({chain}) (a wavefront's forwards), in the loop's next batch of
  // chains of the same graphs; its read, if it asks for one, counts as the request's own.
  StatusOr<ZipArGraphs::Output> Run(const ZipArGraphs& graphs, const ZipArGraphs::Chain& chain);
  // DrawTokens(call), in the loop's next batched draw (TokenDrawer::DrawBatch): exactly the
  // tokens it draws alone. From outside the loop's requests it draws at once.
  StatusOr<torch::Tensor> Draw(const DrawCall& call);
  // The chain's decision (ChainJudge), in the loop's next batched judgement: the batch's one
  // host read, which the request waited on, counts as a read of its own, as when it judges
  // alone. From outside the loop's requests it judges at once.
  StatusOr<ChainDecision> Judge(const ChainCall& call) override;
  // tensor.to(kCPU, dtype) (HostReader), in the loop's next batched read, counted as a read of
  // the request's own, as Judge's. From outside the loop's requests it reads at once.
  StatusOr<torch::Tensor> Read(const torch::Tensor& tensor, torch::ScalarType dtype) override;

  // From a request, between two of its steps: lets the loop admit new requests (a step that
  // makes no forward would otherwise never pause). Outside the loop's requests: nothing.
  void StepDone();

  // Totals since construction (tests, benchmarks).
  struct Counters {
    int64_t forwards = 0;   // executed forwards
    int64_t calls = 0;      // calls they carried
    int64_t max_calls = 0;  // most calls in one forward
    int64_t rounds = 0;     // runs of queued calls (of cheap calls, or of forwards)
    int64_t requests = 0;   // requests started
    int64_t most_active = 0;  // most requests active at once
  };
  Counters counters() const;

 private:
  // A queued call: what every model's calls share (queue order, rows, its request's wake-up).
  struct Pending;
  // A queued call of one kind of model, holding its call and result (engine_loop.cc).
  template <typename Model, typename Call, typename Result>
  struct Queued;

  // A call of `model` (its kind of Component) through the loop: queued, and the calling
  // request paused until its batch has run; at once when called from outside the loop's
  // requests. `rows` are reported, `budget_rows` counted against max_rows. With `counts_read`
  // (a judgement or a read), a queued call counts as a host read of the request's own: the
  // batch's one read ran in the loop's context, and the request waited on it as on its own.
  template <typename Model, typename Call, typename Result>
  StatusOr<Result> Submit(const Model& model, const Call& call, Component component,
                          int64_t rows, int64_t budget_rows, bool counts_read = false);
  // Queues `self` and pauses the calling request until its batch has run; runs it at once
  // when called from outside the loop's requests. True when queued.
  bool Enqueue(Pending* self);
  // Runs the queued cheap calls if there are any, else every queued forward (one per model in
  // order of first arrival, each split at max_rows), and wakes the requests whose calls ran.
  void RunQueued();
  // Runs `batch` (all of one model) and posts each call's result.
  void Execute(const std::vector<Pending*>& batch);

  const Options options_;
  const Observer observer_;
  const TokenDrawer drawer_{};  // the key under which every request's draws batch
  const ChainRule chain_rule_{};  // the key under which every request's chain judgements batch
  const HostTransfer host_transfer_{};  // the key under which every request's reads batch
  // The loop's thread only: the active requests (a member, not Serve's local: while a fiber
  // runs, a leak checker sees its stack, not the thread's), the queued calls, and whether the
  // one running now paused for a forward (rather than between its steps).
  struct ActiveRequest;
  std::vector<ActiveRequest> active_requests_;
  std::vector<Pending*> queue_;
  bool paused_for_forward_ = false;
  bool serving_ = false;
  mutable std::mutex counters_mu_;  // counters are read from other threads
  Counters counters_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_ENGINE_LOOP_H_
