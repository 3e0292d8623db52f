#include "engine/decode/engine_loop.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "engine/core/fiber.h"
#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"

namespace mulo::engine {
namespace {

// How each kind of model runs one call alone and several as one batched forward.
StatusOr<ForwardOutput> RunAlone(const TokenModel& model, const ForwardCall& c) {
  return model.Forward(*c.cache, c.embeddings, c.positions, c.mask, c.logits_mode);
}
StatusOr<std::vector<ForwardOutput>> RunTogether(const TokenModel& model,
                                                 const std::vector<ForwardCall>& calls,
                                                 PackedGemms gemms) {
  return model.ForwardBatch(calls, gemms);
}

StatusOr<torch::Tensor> RunAlone(const EagleHead& head, const HeadCall& c) {
  return head.Forward(*c.cache, c.token_embeddings, c.features, c.mask);
}
StatusOr<std::vector<torch::Tensor>> RunTogether(const EagleHead& head,
                                                 const std::vector<HeadCall>& calls,
                                                 PackedGemms gemms) {
  return head.ForwardBatch(calls, gemms);
}

StatusOr<torch::Tensor> RunAlone(const Resampler& resampler, const ResampleCall& c) {
  return c.drawn ? resampler.ApplyDrawn(c.ids, c.h, c.w) : resampler.Apply(c.ids, c.h, c.w);
}
StatusOr<std::vector<torch::Tensor>> RunTogether(const Resampler& resampler,
                                                 const std::vector<ResampleCall>& calls,
                                                 PackedGemms gemms) {
  return resampler.ApplyBatch(calls, gemms);
}

// What a graph set's Run gives for a batch of `Call`s (no such type, so no match, otherwise).
template <typename Graphs, typename Call>
using BatchOutputs = std::decay_t<decltype(
    std::declval<const Graphs&>().Run(std::declval<const std::vector<Call>&>()).value())>;

// The graph sets (ResamplerGraphs, RowGraphs, VerifyGraphs, MuloVerifyGraphs, TreeVerifyGraphs,
// EagleTreeGraphs, ZipArGraphs' forwards): their Run takes a batch's calls (one replay per
// key), so a call alone is a batch of one. Only callees whose Run takes a vector of the call match;
// the models' overloads above are exact, non-template matches.
template <typename Graphs, typename Call, typename Outputs = BatchOutputs<Graphs, Call>>
StatusOr<typename Outputs::value_type> RunAlone(const Graphs& graphs, const Call& c) {
  MULO_ASSIGN_OR_RETURN(Outputs outputs, graphs.Run(std::vector<Call>{c}));
  return std::move(outputs[0]);
}
template <typename Graphs, typename Call, typename Outputs = BatchOutputs<Graphs, Call>>
StatusOr<Outputs> RunTogether(const Graphs& graphs, const std::vector<Call>& calls, PackedGemms) {
  return graphs.Run(calls);
}

StatusOr<ZipArGraphs::Output> RunAlone(const ZipArGraphs& graphs, const ZipArGraphs::Chain& c) {
  MULO_ASSIGN_OR_RETURN(std::vector<ZipArGraphs::Output> outputs, graphs.RunChains({c}));
  return std::move(outputs[0]);
}

StatusOr<std::vector<ZipArGraphs::Output>> RunTogether(
    const ZipArGraphs& graphs, const std::vector<ZipArGraphs::Chain>& chains, PackedGemms) {
  return graphs.RunChains(chains);
}

StatusOr<torch::Tensor> RunAlone(const TokenDrawer&, const DrawCall& c) {
  return GuardTorch("DrawTokens", [&]() -> StatusOr<torch::Tensor> { return DrawTokens(c); });
}
StatusOr<std::vector<torch::Tensor>> RunTogether(const TokenDrawer& drawer,
                                                 const std::vector<DrawCall>& calls, PackedGemms) {
  return GuardTorch("DrawBatch", [&]() -> StatusOr<std::vector<torch::Tensor>> {
    return drawer.DrawBatch(calls);
  });
}

StatusOr<ChainDecision> RunAlone(const EngineLoop::ChainRule&, const ChainCall& c) {
  return GuardTorch("JudgeChains", [&]() -> StatusOr<ChainDecision> {
    return JudgeChainsTogether({c})[0];
  });
}
StatusOr<std::vector<ChainDecision>> RunTogether(const EngineLoop::ChainRule&,
                                                 const std::vector<ChainCall>& calls,
                                                 PackedGemms) {
  return GuardTorch("JudgeChains", [&]() -> StatusOr<std::vector<ChainDecision>> {
    return JudgeChainsTogether(calls);
  });
}

StatusOr<torch::Tensor> RunAlone(const EngineLoop::HostTransfer&, const EngineLoop::ReadCall& c) {
  return GuardTorch("HostRead", [&]() -> StatusOr<torch::Tensor> {
    return HostRead(c.tensor, c.dtype);
  });
}
StatusOr<std::vector<torch::Tensor>> RunTogether(const EngineLoop::HostTransfer&,
                                                 const std::vector<EngineLoop::ReadCall>& calls,
                                                 PackedGemms) {
  return GuardTorch("HostReadTogether", [&]() -> StatusOr<std::vector<torch::Tensor>> {
    std::vector<torch::Tensor> tensors;
    std::vector<torch::ScalarType> dtypes;
    for (const EngineLoop::ReadCall& c : calls) {
      tensors.push_back(c.tensor);
      dtypes.push_back(c.dtype);
    }
    return HostReadTogether(tensors, dtypes);
  });
}

// Draws, chain judgements and host reads: short next to a forward, and each is a step's
// midpoint, between two forwards.
bool IsCheap(EngineLoop::Component component) {
  return component == EngineLoop::Component::kSampler ||
         component == EngineLoop::Component::kVerifier ||
         component == EngineLoop::Component::kHostRead;
}

}  // namespace

// One request the loop steps: its fiber, and whether it waits for a queued forward.
struct EngineLoop::ActiveRequest {
  std::unique_ptr<Fiber> fiber;
  bool waiting = false;
};

struct EngineLoop::Pending {
  virtual ~Pending() = default;
  // Runs `group` (calls of this call's model, so of its kind) as one forward and stores each
  // call's result.
  virtual void RunGroup(const std::vector<Pending*>& group, PackedGemms gemms) = 0;

  const void* model = nullptr;           // calls of one model batch together, if of one kind
  const std::type_info* kind = nullptr;  // the call's type (a model may take two kinds)
  Component component = Component::kTransformer;
  const Fiber* request = nullptr;  // the request that waits on it
  int64_t rows = 0;         // reported rows
  int64_t budget_rows = 0;  // rows counted against max_rows
};

template <typename Model, typename Call, typename Result>
struct EngineLoop::Queued : EngineLoop::Pending {
  Queued(const Model& m, const Call& c) : callee(m), call(c) {
    model = &m;
    kind = &typeid(Call);
  }

  void RunGroup(const std::vector<Pending*>& group, PackedGemms gemms) override {
    if (group.size() == 1) {
      // Alone: exactly the forward a request outside the loop runs.
      result = RunAlone(callee, call);
      return;
    }
    std::vector<Call> calls;
    calls.reserve(group.size());
    for (Pending* p : group) calls.push_back(static_cast<Queued*>(p)->call);
    StatusOr<std::vector<Result>> outputs = RunTogether(callee, calls, gemms);
    for (size_t i = 0; i < group.size(); ++i) {
      auto* queued = static_cast<Queued*>(group[i]);
      if (outputs.ok()) {
        queued->result = std::move((*outputs)[i]);
      } else {
        queued->result = outputs.status();
      }
    }
  }

  const Model& callee;  // the model whose calls these are
  Call call;
  StatusOr<Result> result = InternalError("EngineLoop: the forward never ran");
};

EngineLoop::EngineLoop(Options options, Observer observer)
    : options_(options), observer_(std::move(observer)) {}

EngineLoop::~EngineLoop() = default;

const char* EngineLoop::ComponentName(Component component) {
  switch (component) {
    case Component::kTransformer:
      return "transformer";
    case Component::kEagleHead:
      return "eagle_head";
    case Component::kResampler:
      return "resampler";
    case Component::kSampler:
      return "sampler";
    case Component::kVerifier:
      return "verifier";
    case Component::kHostRead:
      return "host_read";
  }
  return "unknown";
}

EngineLoop::Counters EngineLoop::counters() const {
  std::lock_guard<std::mutex> lock(counters_mu_);
  return counters_;
}

Status EngineLoop::Serve(Source& source) {
  std::vector<ActiveRequest>& active = active_requests_;
  Status status;
  // Requests join between rounds and between any request's steps; with none active the
  // source may wait for one.
  const auto admit = [&] {
    while (true) {
      Task task = source.Next(static_cast<int>(active.size()));
      if (!task) break;
      std::string error;
      std::unique_ptr<Fiber> fiber = Fiber::Make(std::move(task), &error);
      if (fiber == nullptr) {
        status = InternalError("EngineLoop: " + error);
        continue;
      }
      active.push_back({std::move(fiber)});
      std::lock_guard<std::mutex> lock(counters_mu_);
      ++counters_.requests;
      counters_.most_active =
          std::max<int64_t>(counters_.most_active, static_cast<int64_t>(active.size()));
    }
  };
  serving_ = true;
  // The batched forwards run here, outside any request's scope: inference only.
  at::NoGradGuard no_grad;
  while (true) {
    admit();
    if (active.empty()) break;
    // A round: every request goes on until it waits on a queued call or ends. One that pauses
    // between its steps goes on again at once, after the loop has admitted new requests.
    while (true) {
      bool resumed = false;
      for (size_t i = 0; i < active.size(); ++i) {
        ActiveRequest& request = active[i];
        if (request.waiting || request.fiber->finished()) continue;
        paused_for_forward_ = false;
        request.fiber->Resume();
        request.waiting = paused_for_forward_;
        resumed = true;
      }
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [](const ActiveRequest& r) { return r.fiber->finished(); }),
                   active.end());
      if (!resumed) break;
      admit();
    }
    RunQueued();
  }
  serving_ = false;
  return status;
}

void EngineLoop::StepDone() {
  if (serving_ && Fiber::Current() != nullptr) Fiber::Yield();
}

void EngineLoop::RunQueued() {
  if (queue_.empty()) return;
  // While any request waits on a cheap call, run only those and let their requests go on to
  // their next forward within this round. Otherwise a request that queued a draw while the
  // others queued forwards would stay half a step behind them for good, and no forward of
  // the loop would carry every request (its batches, and a pool's graph replays, halve).
  const bool cheap_first = std::any_of(queue_.begin(), queue_.end(),
                                       [](const Pending* p) { return IsCheap(p->component); });
  std::vector<Pending*> run;
  std::vector<Pending*> later;
  for (Pending* p : queue_) (!cheap_first || IsCheap(p->component) ? run : later).push_back(p);
  queue_ = std::move(later);
  std::vector<std::vector<Pending*>> batches;
  // (model, kind of call) -> its batch being filled
  std::map<std::pair<const void*, const std::type_info*>, size_t> open_batch;
  std::vector<int64_t> batch_rows;
  for (Pending* p : run) {
    const auto key = std::make_pair(p->model, p->kind);
    auto it = open_batch.find(key);
    if (it == open_batch.end() || batch_rows[it->second] + p->budget_rows > options_.max_rows) {
      open_batch[key] = batches.size();
      batches.emplace_back();
      batch_rows.push_back(0);
      it = open_batch.find(key);
    }
    batches[it->second].push_back(p);
    batch_rows[it->second] += p->budget_rows;
  }
  for (const auto& batch : batches) Execute(batch);
  // Wake the requests whose calls ran; the others still wait on theirs.
  for (ActiveRequest& request : active_requests_) {
    if (std::any_of(run.begin(), run.end(),
                    [&](const Pending* p) { return p->request == request.fiber.get(); })) {
      request.waiting = false;
    }
  }
  std::lock_guard<std::mutex> lock(counters_mu_);
  ++counters_.rounds;
}

template <typename Model, typename Call, typename Result>
StatusOr<Result> EngineLoop::Submit(const Model& model, const Call& call, Component component,
                                    int64_t rows, int64_t budget_rows, bool counts_read) {
  Queued<Model, Call, Result> self(model, call);
  self.component = component;
  self.rows = rows;
  self.budget_rows = budget_rows;
  if (Enqueue(&self) && counts_read && self.result.ok()) CountHostRead();
  return std::move(self.result);
}

StatusOr<ForwardOutput> EngineLoop::Run(const TokenModel& model, const ForwardCall& call) {
  if (call.cache == nullptr) return InvalidArgumentError("EngineLoop::Run: no cache");
  MULO_RETURN_IF_ERROR(model.CheckForward(*call.cache, call.embeddings, call.positions, call.mask));
  const int64_t rows = call.embeddings.size(0) * call.embeddings.size(1);
  return Submit<TokenModel, ForwardCall, ForwardOutput>(model, call, Component::kTransformer,
                                                        rows, rows);
}

StatusOr<torch::Tensor> EngineLoop::Run(const EagleHead& head, const HeadCall& call) {
  MULO_RETURN_IF_ERROR(head.CheckForward(call));
  const int64_t rows = call.features.size(0) * call.features.size(1);
  return Submit<EagleHead, HeadCall, torch::Tensor>(head, call, Component::kEagleHead, rows,
                                                    rows);
}

StatusOr<torch::Tensor> EngineLoop::Run(const Resampler& resampler, const ResampleCall& call) {
  MULO_RETURN_IF_ERROR(resampler.CheckIds(call.ids, call.h, call.w, !call.drawn));
  const int64_t rows =
      call.ids.size(0) * resampler.OutputRows(call.h) * resampler.OutputCols(call.w);
  return Submit<Resampler, ResampleCall, torch::Tensor>(resampler, call, Component::kResampler,
                                                        rows, /*budget_rows=*/0);
}

StatusOr<torch::Tensor> EngineLoop::Run(const ResamplerGraphs& graphs, const ResampleCall& call) {
  if (!graphs.Fits(call)) {
    return InvalidArgumentError("EngineLoop::Run: the call does not fit the resampler's graphs");
  }
  const Resampler& resampler = graphs.resampler();
  const int64_t rows = resampler.OutputRows(call.h) * resampler.OutputCols(call.w);
  return Submit<ResamplerGraphs, ResampleCall, torch::Tensor>(graphs, call, Component::kResampler,
                                                              rows, /*budget_rows=*/0);
}

StatusOr<RowGraphs::Output> EngineLoop::Run(const RowGraphs& rows, const RowGraphs::Call& call) {
  if (call.cache == nullptr || !rows.Fits(*call.cache, call.sampling)) {
    return InvalidArgumentError("EngineLoop::Run: the row does not fit the row graphs");
  }
  // Two streams of one new row each at every step of the row; the batch's one read of the
  // rows' tokens counts as a read of each request's own, as a judgement's does (a chain of
  // drafts, or a row left on the device, reads nothing).
  return Submit<RowGraphs, RowGraphs::Call, RowGraphs::Output>(
      rows, call, Component::kTransformer, /*rows=*/2 * rows.rows_written(), /*budget_rows=*/2,
      /*counts_read=*/rows.reads_tokens());
}

StatusOr<VerifyGraphs::Output> EngineLoop::Run(const VerifyGraphs& verify,
                                               const VerifyGraphs::Call& call) {
  if (call.cache == nullptr || !verify.Fits(*call.cache, call.sampling)) {
    return InvalidArgumentError("EngineLoop::Run: the chain does not fit the verify graphs");
  }
  const int64_t rows = 2 * (verify.drafts() + 1);  // two streams of the chain's rows
  return Submit<VerifyGraphs, VerifyGraphs::Call, VerifyGraphs::Output>(
      verify, call, Component::kTransformer, rows, /*budget_rows=*/rows, /*counts_read=*/true);
}

StatusOr<MuloVerifyGraphs::Output> EngineLoop::Run(const MuloVerifyGraphs& verify,
                                                   const MuloVerifyGraphs::Call& call) {
  if (call.cache == nullptr ||
      !verify.Fits(*call.cache, call.cache->length(), static_cast<int64_t>(call.tail.size()),
                   call.sampling)) {
    return InvalidArgumentError("EngineLoop::Run: the step does not fit MuLo-SD's verify graphs");
  }
  // Two streams of the step's rows, padded as the graphs feed them.
  const int64_t rows = 2 * verify.RowsOf(static_cast<int64_t>(call.tail.size()));
  return Submit<MuloVerifyGraphs, MuloVerifyGraphs::Call, MuloVerifyGraphs::Output>(
      verify, call, Component::kTransformer, rows, /*budget_rows=*/rows, /*counts_read=*/true);
}

StatusOr<TreeVerifyGraphs::Output> EngineLoop::Run(const TreeVerifyGraphs& verify,
                                                   const TreeVerifyGraphs::Call& call) {
  const TreeVerifyGraphs::Shape& shape = verify.shape();
  const int64_t nodes = shape.jacobi_window()   ? shape.nodes
                        : call.tokens.defined() ? call.tokens.size(0)
                                                : 0;
  if (call.cache == nullptr || !verify.Fits(*call.cache, nodes, shape.max_depth, call.sampling)) {
    return InvalidArgumentError("EngineLoop::Run: the tree does not fit the tree verify graphs");
  }
  const int64_t rows = 2 * (shape.nodes + 1);  // two streams of the root and the tree
  return Submit<TreeVerifyGraphs, TreeVerifyGraphs::Call, TreeVerifyGraphs::Output>(
      verify, call, Component::kTransformer, rows, /*budget_rows=*/rows, /*counts_read=*/true);
}

StatusOr<EagleTreeGraphs::Draft> EngineLoop::Run(const EagleTreeGraphs& graphs,
                                                 const EagleTreeGraphs::Call& call) {
  MULO_RETURN_IF_ERROR(graphs.Check(call));
  // Two streams of the request's widest forward; the replay's forwards run one after another
  // and read nothing back.
  const int64_t rows = 2 * graphs.lane_rows();
  return Submit<EagleTreeGraphs, EagleTreeGraphs::Call, EagleTreeGraphs::Draft>(
      graphs, call, Component::kEagleHead, rows, /*budget_rows=*/rows);
}

StatusOr<ZipArGraphs::Output> EngineLoop::Run(const ZipArGraphs& graphs,
                                              const ZipArGraphs::Call& call) {
  const int64_t inputs = static_cast<int64_t>(call.tokens.size());
  if (call.cache == nullptr || !graphs.Fits(*call.cache, inputs, call.sampling)) {
    return InvalidArgumentError("EngineLoop::Run: the forward does not fit the ZipAR graphs");
  }
  // Two streams of the forward's rows, padded as the graphs feed them.
  const int64_t rows = 2 * ZipArGraphs::RowsOf(inputs);
  return Submit<ZipArGraphs, ZipArGraphs::Call, ZipArGraphs::Output>(
      graphs, call, Component::kTransformer, rows, /*budget_rows=*/rows,
      /*counts_read=*/call.read);
}

StatusOr<ZipArGraphs::Output> EngineLoop::Run(const ZipArGraphs& graphs,
                                              const ZipArGraphs::Chain& chain) {
  if (!graphs.FitsChain(chain)) {
    return InvalidArgumentError("EngineLoop::Run: the chain does not fit the ZipAR graphs");
  }
  // Two streams of the widest forward's rows; its forwards run one after another.
  int64_t widest = 0;
  for (const ZipArGraphs::Call& call : chain.forwards) {
    widest = std::max(widest, ZipArGraphs::RowsOf(static_cast<int64_t>(call.tokens.size())));
  }
  const bool read = std::any_of(chain.forwards.begin(), chain.forwards.end(),
                                [](const ZipArGraphs::Call& call) { return call.read; });
  return Submit<ZipArGraphs, ZipArGraphs::Chain, ZipArGraphs::Output>(
      graphs, chain, Component::kTransformer, 2 * widest * chain.forwards.size(),
      /*budget_rows=*/2 * widest, /*counts_read=*/read);
}

StatusOr<torch::Tensor> EngineLoop::Draw(const DrawCall& call) {
  return Submit<TokenDrawer, DrawCall, torch::Tensor>(drawer_, call, Component::kSampler,
                                                      call.count(), /*budget_rows=*/0);
}

StatusOr<ChainDecision> EngineLoop::Judge(const ChainCall& call) {
  return Submit<ChainRule, ChainCall, ChainDecision>(chain_rule_, call, Component::kVerifier,
                                                     call.length(), /*budget_rows=*/0,
                                                     /*counts_read=*/true);
}

StatusOr<torch::Tensor> EngineLoop::Read(const torch::Tensor& tensor, torch::ScalarType dtype) {
  return Submit<HostTransfer, ReadCall, torch::Tensor>(host_transfer_, {tensor, dtype},
                                                       Component::kHostRead, tensor.numel(),
                                                       /*budget_rows=*/0, /*counts_read=*/true);
}

bool EngineLoop::Enqueue(Pending* self) {
  if (!serving_ || Fiber::Current() == nullptr) {
    Execute({self});  // not one of the loop's requests: a batch of one, now
    return false;
  }
  self->request = Fiber::Current();
  queue_.push_back(self);
  // The loop runs the queue once every request waits, then resumes each: by then `self` ran.
  paused_for_forward_ = true;
  Fiber::Yield();
  return true;
}

void EngineLoop::Execute(const std::vector<Pending*>& batch) {
  int64_t rows = 0;
  for (const Pending* p : batch) rows += p->rows;
  batch[0]->RunGroup(batch, options_.gemms);
  if (observer_) {
    observer_({batch[0]->component, static_cast<int64_t>(batch.size()), rows});
  }
  std::lock_guard<std::mutex> lock(counters_mu_);
  ++counters_.forwards;
  counters_.calls += static_cast<int64_t>(batch.size());
  counters_.max_calls = std::max<int64_t>(counters_.max_calls, batch.size());
}

}  // namespace mulo::engine
