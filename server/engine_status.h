// The one place the engine's status type meets Abseil's, at the server's edge: the engine
// depends on LibTorch only and reports engine::Status; the server answers absl::Status.
#ifndef MULO_SERVER_ENGINE_STATUS_H_
#define MULO_SERVER_ENGINE_STATUS_H_

#include "absl/status/status.h"
#include "engine/core/status.h"

namespace mulo::server {

// engine::Status -> absl::Status, keeping the code and message.
absl::Status ToAbsl(const engine::Status& status);

}  // namespace mulo::server

#endif  // MULO_SERVER_ENGINE_STATUS_H_
