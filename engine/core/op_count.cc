#include "engine/core/op_count.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <cstring>
#include <memory>
#include <vector>

#include "engine/core/execution_counters.h"

namespace mulo::engine {
namespace {

// Per-thread observer state (the counts themselves go to the execution context's counters,
// execution_counters.h). `open_calls` holds, for each operator still running on the thread,
// whether it is a kernel or runs inside one.
struct ThreadState {
  int scopes = 0;
  at::CallbackHandle handle = 0;
  std::vector<bool> open_calls;
  std::vector<std::string>* kernel_names = nullptr;
  int replay_depth = 0;  // open GraphReplay scopes: their operators are the graph's
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

// True when the operator has a kernel of its own for a device (or one shared by all devices)
// rather than only a decomposition into other operators.
bool HasOwnKernel(const at::RecordFunction& call) {
  const c10::optional<c10::OperatorName> name = call.operator_name();
  if (!name.has_value()) return false;
  const c10::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findOp(*name);
  if (!op.has_value()) return false;
  return op->hasKernelForAnyDispatchKey(c10::DispatchKeySet(
      {c10::DispatchKey::CPU, c10::DispatchKey::CUDA,
       c10::DispatchKey::CompositeExplicitAutograd}));
}

// A call is a kernel when it has a kernel of its own, is not metadata-only and runs inside no
// other kernel: what a composite operator (linear) calls is counted where the work is (addmm),
// and what a kernel calls inside itself (addmm's copy of the bias on the CPU) is not counted
// again.
std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& call) {
  ThreadState& state = State();
  if (state.replay_depth > 0) {
    state.open_calls.push_back(true);  // popped by OnEnd; nothing inside is counted
    return nullptr;
  }
  ExecutionCounters& counters = CurrentCounters();
  ++counters.ops_dispatched;
  const bool inside_kernel = !state.open_calls.empty() && state.open_calls.back();
  const bool kernel = !inside_kernel && !IsMetadataOnlyOp(call.name()) && HasOwnKernel(call);
  if (kernel) {
    ++counters.ops_kernels;
    if (state.kernel_names != nullptr) state.kernel_names->push_back(call.name());
  }
  state.open_calls.push_back(inside_kernel || kernel);
  return nullptr;
}

void OnEnd(const at::RecordFunction&, at::ObserverContext*) {
  ThreadState& state = State();
  if (!state.open_calls.empty()) state.open_calls.pop_back();
}

}  // namespace

void CountKernelLaunch(const char* name) {
  ThreadState& state = State();
  if (state.scopes == 0 || state.replay_depth > 0) return;
  if (!state.open_calls.empty() && state.open_calls.back()) return;  // inside a kernel
  ExecutionCounters& counters = CurrentCounters();
  ++counters.ops_dispatched;
  ++counters.ops_kernels;
  if (state.kernel_names != nullptr) state.kernel_names->push_back(name);
}

OpCounts ThreadOpCounts() {
  const ExecutionCounters& counters = CurrentCounters();
  return OpCounts{counters.ops_dispatched, counters.ops_kernels, counters.graph_replays};
}

GraphReplay::GraphReplay() {
  ++CurrentCounters().graph_replays;
  ++State().replay_depth;
}

GraphReplay::~GraphReplay() { --State().replay_depth; }

OpCounting::OpCounting() : OpCounting(nullptr) {}

OpCounting::OpCounting(std::vector<std::string>* kernel_names) {
  ThreadState& state = State();
  previous_names_ = state.kernel_names;
  if (kernel_names != nullptr) state.kernel_names = kernel_names;
  if (state.scopes++ == 0) {
    state.open_calls.clear();
    state.handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&OnStart, &OnEnd).scopes({at::RecordScope::FUNCTION}));
  }
}

OpCounting::~OpCounting() {
  ThreadState& state = State();
  state.kernel_names = previous_names_;
  if (--state.scopes == 0) at::removeCallback(state.handle);
}

bool IsMetadataOnlyOp(const char* name) {
  static constexpr const char* kMetadataOnly[] = {
      "aten::view",        "aten::_unsafe_view", "aten::reshape",     "aten::_reshape_alias",
      "aten::as_strided",  "aten::select",       "aten::slice",       "aten::narrow",
      "aten::expand",      "aten::expand_as",    "aten::t",           "aten::transpose",
      "aten::permute",     "aten::unsqueeze",    "aten::squeeze",     "aten::detach",
      "aten::alias",       "aten::view_as",      "aten::unflatten",   "aten::flatten",
      "aten::empty",       "aten::empty_like",   "aten::empty_strided", "aten::resize_",
      "aten::lift_fresh",  "aten::unbind",       "aten::split",       "aten::chunk",
      "aten::split_with_sizes", "aten::movedim",  "aten::numpy_T",    "aten::set_",
  };
  for (const char* op : kMetadataOnly) {
    if (std::strcmp(name, op) == 0) return true;
  }
  return false;
}

}  // namespace mulo::engine
