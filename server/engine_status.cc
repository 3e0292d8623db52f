#include "server/engine_status.h"

namespace mulo::server {

absl::Status ToAbsl(const engine::Status& status) {
  using engine::StatusCode;
  switch (status.code()) {
    case StatusCode::kOk:
      return absl::OkStatus();
    case StatusCode::kCancelled:
      return absl::CancelledError(status.message());
    case StatusCode::kInvalidArgument:
      return absl::InvalidArgumentError(status.message());
    case StatusCode::kDeadlineExceeded:
      return absl::DeadlineExceededError(status.message());
    case StatusCode::kNotFound:
      return absl::NotFoundError(status.message());
    case StatusCode::kFailedPrecondition:
      return absl::FailedPreconditionError(status.message());
    case StatusCode::kOutOfRange:
      return absl::OutOfRangeError(status.message());
    case StatusCode::kUnavailable:
      return absl::UnavailableError(status.message());
    case StatusCode::kDataLoss:
      return absl::DataLossError(status.message());
    case StatusCode::kUnimplemented:
      return absl::UnimplementedError(status.message());
    case StatusCode::kInternal:
      break;
  }
  return absl::InternalError(status.message());
}

}  // namespace mulo::server
