// Runs torch code and turns a thrown c10::Error (or any std::exception) into a Status, so that
// no exception crosses the engine API.
#ifndef MULO_ENGINE_CORE_TORCH_GUARD_H_
#define MULO_ENGINE_CORE_TORCH_GUARD_H_

#include <exception>
#include <string>
#include <type_traits>
#include <utility>

#include "engine/core/status.h"

namespace mulo::engine {

// `fn` returns Status or StatusOr<T>; `what` names the operation in the error message.
template <typename Fn>
auto GuardTorch(const std::string& what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    std::string message = e.what();
    // c10::Error messages carry a C++ backtrace after the first line; keep the first line.
    auto newline = message.find('\n');
    if (newline != std::string::npos) message.resize(newline);
    return InternalError(what + ": " + message);
  }
}

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_TORCH_GUARD_H_
