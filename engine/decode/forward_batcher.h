// Continuous batching of model forwards across requests.
//
// Every request decodes on its own thread, its method's loop unchanged; each forward it makes
// of a transformer (ModelStream: prefill, feed, tree / window sets), of the EAGLE head
// (EagleProposer) or of a MuLo-SD resampler (DecodeSession::Resample) is handed to the batcher
// instead of running at once. When every seated request is waiting for a forward (or the
// oldest has waited max_wait, or a model's rows reach max_rows), one waiting thread becomes
// the leader and runs everything queued: one batched forward per model (Transformer::
// ForwardBatch, EagleHead::ForwardBatch, Resampler::ApplyBatch; target and drafter forwards
// of different requests and methods side by side), split where a model's rows exceed
// max_rows. Requests join (Seat) and leave between any two forwards, so a finished request
// never holds the others back and a new one starts at the next forward.
//
// Why threads with a rendezvous rather than rewriting each method as a state machine that
// yields its forwards: a method's file keeps reading like its paper's algorithm box, the
// per-thread host-read count stays the request's own, and a lone request runs exactly the
// code it ran before: its causal appends skip the batcher (Alone), its other forwards are a
// batch of one, a plain Transformer::Forward.
#ifndef MULO_ENGINE_DECODE_FORWARD_BATCHER_H_
#define MULO_ENGINE_DECODE_FORWARD_BATCHER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "engine/core/status.h"
#include "engine/model/eagle_head.h"
#include "engine/model/resampler.h"
#include "engine/model/token_model.h"

namespace mulo::engine {

class ForwardBatcher {
 public:
  struct Options {
    // Rows (guidance streams x new positions) per batched transformer or head forward; a
    // single call above it still runs, alone. Resampler calls are not counted against it.
    int64_t max_rows = 256;
    // How long the oldest queued forward waits for seated requests that are busy elsewhere
    // (sampling, a resampler, streaming) before the batch runs without them.
    std::chrono::microseconds max_wait{5000};
    // kPerSequence: every request's tokens are exactly those it decodes alone (CPU float32);
    // kShared: fewer, larger GEMMs, equal up to the last bits (forward_batch's comment).
    PackedGemms gemms = PackedGemms::kPerSequence;
  };
  // What a batched forward ran: a transformer (target or drafter), the EAGLE head, or a
  // resampler (U_r or D_r).
  enum class Component { kTransformer, kEagleHead, kResampler };
  static const char* ComponentName(Component component);

  // One executed forward: of what, how many requests' calls it carried and how many rows
  // (token rows; for a resampler, the output grid positions).
  struct BatchEvent {
    Component component = Component::kTransformer;
    int64_t calls = 0;
    int64_t rows = 0;
  };
  using Observer = std::function<void(const BatchEvent&)>;

  explicit ForwardBatcher(Options options, Observer observer = nullptr);
  ForwardBatcher(const ForwardBatcher&) = delete;
  ForwardBatcher& operator=(const ForwardBatcher&) = delete;

  // A request's place in the batch for the span of its decoding: while seated, a batch waits
  // for its next forward (up to max_wait). Leaving wakes the others.
  class Seat {
   public:
    explicit Seat(ForwardBatcher* batcher);
    ~Seat();
    Seat(const Seat&) = delete;
    Seat& operator=(const Seat&) = delete;

   private:
    ForwardBatcher* batcher_;
  };

  // Transformer::Forward(call) of `model`, run inside the next batch. Checks the call first
  // (the errors Forward returns) so a bad call never reaches a batch; blocks until its batch
  // has run. The caller's cache must not be touched by anyone else meanwhile.
  StatusOr<ForwardOutput> Run(const TokenModel& model, const ForwardCall& call);
  // EagleHead::Forward(call), the same way.
  StatusOr<torch::Tensor> Run(const EagleHead& head, const HeadCall& call);
  // Resampler::Apply(call.ids, call.h, call.w), the same way.
  StatusOr<torch::Tensor> Run(const Resampler& resampler, const ResampleCall& call);

  // Whether at most one request is seated: its forwards would run alone, so it may run its
  // causal appends directly (Transformer::ForwardTokens, which a GPU model replays from CUDA
  // graphs; a batch of one never could). A request seated meanwhile waits at most max_wait
  // for such a forward.
  bool Alone() const;

  // Totals since construction (tests and benchmarks).
  struct Counters {
    int64_t forwards = 0;   // executed forwards
    int64_t calls = 0;      // calls they carried
    int64_t max_calls = 0;  // most calls in one forward
  };
  Counters counters() const;

 private:
  // A queued call: what every model's calls share (queue order, rows, the waiter's wake-up).
  struct Pending;
  // A queued call of one kind of model, holding its call and result (forward_batcher.cc).
  template <typename Model, typename Call, typename Result>
  struct Queued;

  // Queues `self` and returns when its batch has run, leading the batch if the queue is ready
  // while it waits.
  void Enqueue(Pending* self);
  // Whether the queue should run now (mu_ held).
  bool ReadyLocked(std::chrono::steady_clock::time_point now) const;
  // Runs `batch` (all of one model) and posts each call's result.
  void Execute(const std::vector<Pending*>& batch);
  // Wakes the first queued waiter, which leads when the queue is ready (mu_ held).
  void WakeFrontLocked();

  const Options options_;
  const Observer observer_;
  mutable std::mutex mu_;
  std::deque<Pending*> queue_;
  int64_t seated_ = 0;
  bool running_ = false;
  Counters counters_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_FORWARD_BATCHER_H_
