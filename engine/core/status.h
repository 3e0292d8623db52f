// Status and StatusOr for the engine API.
//
// The engine depends on LibTorch alone (no Abseil), so it carries this small equivalent of
// absl::Status. The server converts it to absl::Status / grpc::Status at its edge. Torch
// raises c10::Error; every public engine entry point catches it and returns a Status, so no
// exception crosses the engine API.
#ifndef MULO_ENGINE_CORE_STATUS_H_
#define MULO_ENGINE_CORE_STATUS_H_

#include <optional>
#include <string>
#include <utility>

namespace mulo::engine {

enum class StatusCode {
  kOk = 0,
  kCancelled,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kFailedPrecondition,
  kOutOfRange,
  kInternal,
  kUnavailable,
  kDataLoss,
  kUnimplemented,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFoundError(std::string m) {
  return Status(StatusCode::kNotFound, std::move(m));
}
inline Status DataLossError(std::string m) {
  return Status(StatusCode::kDataLoss, std::move(m));
}
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status OutOfRangeError(std::string m) {
  return Status(StatusCode::kOutOfRange, std::move(m));
}
inline Status InternalError(std::string m) {
  return Status(StatusCode::kInternal, std::move(m));
}
inline Status CancelledError(std::string m) {
  return Status(StatusCode::kCancelled, std::move(m));
}
inline Status UnimplementedError(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}
inline Status DeadlineExceededError(std::string m) {
  return Status(StatusCode::kDeadlineExceeded, std::move(m));
}

// A value or the error that prevented it.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit like absl
    if (status_.ok()) status_ = InternalError("StatusOr built from an OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit like absl

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace mulo::engine

#define MULO_STATUS_CONCAT_INNER(a, b) a##b
#define MULO_STATUS_CONCAT(a, b) MULO_STATUS_CONCAT_INNER(a, b)

#define MULO_RETURN_IF_ERROR(expr)                      \
  do {                                                  \
    ::mulo::engine::Status mulo_status_ = (expr);       \
    if (!mulo_status_.ok()) return mulo_status_;        \
  } while (0)

#define MULO_ASSIGN_OR_RETURN(lhs, expr) \
  MULO_ASSIGN_OR_RETURN_IMPL(MULO_STATUS_CONCAT(mulo_statusor_, __LINE__), lhs, expr)

#define MULO_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#endif  // MULO_ENGINE_CORE_STATUS_H_
