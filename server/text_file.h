// A whole file's bytes, for the server's small files: TLS certificates and keys, the API keys
// file, /proc entries. NOT_FOUND naming the path when it cannot be opened.
#ifndef MULO_SERVER_TEXT_FILE_H_
#define MULO_SERVER_TEXT_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace mulo::server {

absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace mulo::server

#endif  // MULO_SERVER_TEXT_FILE_H_
