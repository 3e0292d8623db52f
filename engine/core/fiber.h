// A stackful fiber: a function that runs on a stack of its own and can pause itself (Yield)
// and be resumed later, all on one thread (POSIX ucontext).
//
// Why: the engine loop (engine/decode/engine_loop.h) steps every request of a worker on one
// thread, and packs the forwards the requests ask for into one batched forward per model. A
// method written as its paper's algorithm box calls a forward in the middle of a step and
// uses the result on the next line; as a fiber it keeps that shape, pausing at each forward
// until the loop has run the batch. Threads with a rendezvous did the same at the price of a
// thread per request, timed waits for requests busy elsewhere, and cores contended between
// the requests' host work (docs/design.md, "The engine loop").
//
// Each fiber counts its own host reads and dispatched operators (execution_counters.h) while
// it runs. A fiber must not pause while it holds a lock (the other fibers run on the same
// thread), and exceptions must not leave its function (Make wraps it to catch them all).
#ifndef MULO_ENGINE_CORE_FIBER_H_
#define MULO_ENGINE_CORE_FIBER_H_

#include <ucontext.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "engine/core/execution_counters.h"

namespace mulo::engine {

class Fiber {
 public:
  // Stack reserved per fiber; pages are committed only as they are touched.
  static constexpr size_t kDefaultStackBytes = size_t{8} << 20;

  // A fiber that runs `body` when first resumed; null when its stack cannot be mapped
  // (`error` says why).
  static std::unique_ptr<Fiber> Make(std::function<void()> body, std::string* error,
                                     size_t stack_bytes = kDefaultStackBytes);
  ~Fiber();  // unmaps the stack: the fiber must have finished, or never started
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Runs the fiber on this thread until it yields or its body returns. Not from inside a
  // fiber, and not once finished().
  void Resume();
  bool finished() const { return finished_; }
  // What the fiber's body has counted so far.
  const ExecutionCounters& counters() const { return counters_; }

  // From inside a fiber: pauses it and returns to its Resume. Outside any fiber: nothing.
  static void Yield();
  // The fiber running on this thread, or null.
  static Fiber* Current();

 private:
  Fiber() = default;
  static void Entry(unsigned int high, unsigned int low);

  std::function<void()> body_;
  void* stack_ = nullptr;
  size_t stack_bytes_ = 0;
  ucontext_t context_{};
  ucontext_t caller_{};
  bool finished_ = false;
  ExecutionCounters counters_;
  // AddressSanitizer's view of the stack being left (fiber switches are announced to it).
  const void* caller_stack_bottom_ = nullptr;
  size_t caller_stack_size_ = 0;
  void* fake_stack_ = nullptr;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_FIBER_H_
