#include "engine/core/execution_counters.h"

namespace mulo::engine {
namespace {

ExecutionCounters*& Current() {
  thread_local ExecutionCounters thread_counters;
  thread_local ExecutionCounters* current = &thread_counters;
  return current;
}

}  // namespace

ExecutionCounters& CurrentCounters() { return *Current(); }

CountInto::CountInto(ExecutionCounters* counters) : previous_(Current()) {
  Current() = counters;
}

CountInto::~CountInto() { Current() = previous_; }

}  // namespace mulo::engine
