// What the engine counts as a request decodes, for the GPU cost it would pay: device -> host
// reads (host_read.h), dispatched ATen operators and CUDA graph replays (op_count.h).
//
// Counted per execution context rather than per request, because the reads and operators sit
// in functions that take no request (samplers, verifiers, forwards): a context is the thread,
// or, while a fiber runs on it (fiber.h), that fiber. The engine loop steps every request of a
// worker as a fiber on one thread, so each request's decoding counts into its own fiber's
// counters and the loop's batched forwards into the thread's. Counters only grow: callers take
// differences.
#ifndef MULO_ENGINE_CORE_EXECUTION_COUNTERS_H_
#define MULO_ENGINE_CORE_EXECUTION_COUNTERS_H_

#include <cstdint>

namespace mulo::engine {

struct ExecutionCounters {
  int64_t host_reads = 0;
  int64_t ops_dispatched = 0;  // op_count.h: every ATen operator call
  int64_t ops_kernels = 0;     // op_count.h: the calls that launch a kernel
  int64_t graph_replays = 0;   // op_count.h: CUDA graphs replayed (or emulated), GraphReplay
};

// The counters of what runs now on this thread: the running fiber's, else the thread's own.
ExecutionCounters& CurrentCounters();

// While alive, this thread counts into `counters` (then into what it counted into before).
class CountInto {
 public:
  explicit CountInto(ExecutionCounters* counters);
  ~CountInto();
  CountInto(const CountInto&) = delete;
  CountInto& operator=(const CountInto&) = delete;

 private:
  ExecutionCounters* previous_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_EXECUTION_COUNTERS_H_
