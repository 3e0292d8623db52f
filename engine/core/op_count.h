// Dispatched ATen operators, counted: the CPU-side measure of what each would cost on a GPU
// (a kernel launch, a few microseconds even when the kernel has nothing to do). Together with
// host reads (host_read.h) it makes a decode step's GPU cost visible on a machine without one.
//
// Counting runs only while an OpCounting scope is alive on the thread (a RecordFunction
// observer costs every operator some time, so a server never pays it). Like the host-read
// counter the counts belong to the execution context (the running fiber, else the thread;
// execution_counters.h) and only grow: a request decodes in one context from Begin to Finish,
// and its Stats take the difference. A scope is the thread's: while any is alive every
// context on the thread counts, each into its own counters.
//
// Two numbers per operator (and, beside them, the graph replays; GraphReplay below):
// - dispatched: every ATen operator call, including those a composite operator makes (linear
//   calls matmul, matmul calls mm);
// - kernels: the calls of operators that have a kernel of their own (not only a decomposition
//   into other operators), are not metadata-only (views, reshapes, empty allocations) and do
//   not run inside another kernel: about one kernel launch each on a GPU.
#ifndef MULO_ENGINE_CORE_OP_COUNT_H_
#define MULO_ENGINE_CORE_OP_COUNT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mulo::engine {

struct OpCounts {
  int64_t dispatched = 0;
  int64_t kernels = 0;
  int64_t graph_replays = 0;  // GraphReplay scopes opened (counted with or without OpCounting)
};

// What has been counted in this execution context so far (never reset; take differences).
OpCounts ThreadOpCounts();

// While alive, counts the operators dispatched on the thread that made it. Scopes nest (the
// observer is registered once per thread).
class OpCounting {
 public:
  OpCounting();
  // Also appends the name of every kernel counted while this scope is the innermost one that
  // asked for names (to see what a forward is made of).
  explicit OpCounting(std::vector<std::string>* kernel_names);
  ~OpCounting();
  OpCounting(const OpCounting&) = delete;
  OpCounting& operator=(const OpCounting&) = delete;

 private:
  std::vector<std::string>* previous_names_ = nullptr;
};

// While alive, what the thread runs is a CUDA graph's replay, one launch for the whole graph:
// the context counts one replay, and the operators an emulated replay dispatches (the
// captured body run eagerly on the CPU, LoadOptions::emulate_cuda_graphs) are not counted,
// since a GPU replays them without the host dispatching any. So on the CPU with emulated
// graphs, `dispatched` and `kernels` are the operators a GPU would dispatch outside graphs.
// The capture itself is not a replay: its operators count, as a GPU dispatches them once.
class GraphReplay {
 public:
  GraphReplay();
  ~GraphReplay();
  GraphReplay(const GraphReplay&) = delete;
  GraphReplay& operator=(const GraphReplay&) = delete;
};

// Counts one kernel launched outside ATen's dispatcher (the fused decode kernels,
// engine/kernels), named `name`, as a dispatched operator and a kernel: what an OpCounting scope
// would count for an ATen operator with a kernel of its own (nothing inside a GraphReplay or
// without a scope).
void CountKernelLaunch(const char* name);

// True for operators that only make a view or an uninitialised allocation (no kernel on a
// GPU), by name ("aten::view").
bool IsMetadataOnlyOp(const char* name);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_OP_COUNT_H_
