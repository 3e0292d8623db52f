#include "engine/core/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MULO_FIBER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MULO_FIBER_ASAN 1
#endif
#ifdef MULO_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace mulo::engine {
namespace {

Fiber*& Running() {
  thread_local Fiber* running = nullptr;
  return running;
}

}  // namespace

std::unique_ptr<Fiber> Fiber::Make(std::function<void()> body, std::string* error,
                                   size_t stack_bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes = (stack_bytes + page - 1) / page * page;
  // One guard page below the stack: an overflow faults instead of writing over a neighbour.
  void* mapped = mmap(nullptr, stack_bytes + page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapped == MAP_FAILED) {
    if (error != nullptr) *error = std::string("fiber stack: mmap: ") + std::strerror(errno);
    return nullptr;
  }
  if (mprotect(mapped, page, PROT_NONE) != 0) {
    if (error != nullptr) *error = std::string("fiber stack: mprotect: ") + std::strerror(errno);
    munmap(mapped, stack_bytes + page);
    return nullptr;
  }
#ifdef MULO_FIBER_ASAN
  // The leak checker scans thread stacks only: a paused fiber's stack holds live pointers.
  __lsan_register_root_region(static_cast<char*>(mapped) + page, stack_bytes);
#endif
  std::unique_ptr<Fiber> fiber(new Fiber());
  fiber->body_ = std::move(body);
  fiber->stack_ = mapped;
  fiber->stack_bytes_ = stack_bytes + page;
  getcontext(&fiber->context_);
  fiber->context_.uc_stack.ss_sp = static_cast<char*>(mapped) + page;
  fiber->context_.uc_stack.ss_size = stack_bytes;
  fiber->context_.uc_link = nullptr;  // Entry never returns: it switches back itself
  // makecontext passes int arguments only: the pointer goes in two halves.
  const auto self = reinterpret_cast<uintptr_t>(fiber.get());
  makecontext(&fiber->context_, reinterpret_cast<void (*)()>(&Fiber::Entry), 2,
              static_cast<unsigned int>(self >> 32), static_cast<unsigned int>(self));
  return fiber;
}

Fiber::~Fiber() {
  if (stack_ == nullptr) return;
#ifdef MULO_FIBER_ASAN
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  __lsan_unregister_root_region(static_cast<char*>(stack_) + page, stack_bytes_ - page);
#endif
  munmap(stack_, stack_bytes_);
}

void Fiber::Entry(unsigned int high, unsigned int low) {
  auto* self = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(high) << 32) | low);
#ifdef MULO_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &self->caller_stack_bottom_, &self->caller_stack_size_);
#endif
  try {
    self->body_();
  } catch (...) {
    // Nothing may unwind past this frame (there is no caller frame on this stack). The bodies
    // the engine runs catch their own errors; this is the last line.
  }
  self->body_ = nullptr;  // release what it captured while still on this thread
  self->finished_ = true;
#ifdef MULO_FIBER_ASAN
  __sanitizer_start_switch_fiber(nullptr, self->caller_stack_bottom_, self->caller_stack_size_);
#endif
  setcontext(&self->caller_);
}

void Fiber::Resume() {
  if (finished_ || Running() != nullptr) return;
  Running() = this;
  {
    CountInto counting(&counters_);
#ifdef MULO_FIBER_ASAN
    __sanitizer_start_switch_fiber(&fake_stack_, static_cast<char*>(stack_) + getpagesize(),
                                   stack_bytes_ - getpagesize());
#endif
    swapcontext(&caller_, &context_);
#ifdef MULO_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake_stack_, nullptr, nullptr);
#endif
  }
  Running() = nullptr;
}

void Fiber::Yield() {
  Fiber* self = Running();
  if (self == nullptr) return;
#ifdef MULO_FIBER_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, self->caller_stack_bottom_, self->caller_stack_size_);
#endif
  swapcontext(&self->context_, &self->caller_);
#ifdef MULO_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake, &self->caller_stack_bottom_, &self->caller_stack_size_);
#endif
}

Fiber* Fiber::Current() { return Running(); }

}  // namespace mulo::engine
