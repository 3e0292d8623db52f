// Who may call: the API keys of --api_keys_file (one key per line; blank lines and lines
// starting with '#' are skipped), reloaded on SIGHUP. HTTP clients send
// "Authorization: Bearer <key>", gRPC clients the same as `authorization` metadata (as vLLM's
// --api-key). Keys are compared in constant time and never logged.
#ifndef MULO_SERVER_API_KEYS_H_
#define MULO_SERVER_API_KEYS_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace mulo::server {

class ApiKeys {
 public:
  // No file: every call is allowed.
  ApiKeys() = default;
  // Reads `path`; an error when it cannot be read or holds no key.
  static absl::StatusOr<std::unique_ptr<ApiKeys>> Load(const std::string& path);

  // Reads the file again; when it cannot be read the keys in force stay. A file that holds no
  // key revokes every key: from then on every call is refused until keys are added (Load
  // refuses an empty file at start, where it would be a mistake). Returns how many it holds.
  absl::StatusOr<int> Reload();

  bool enabled() const { return !path_.empty(); }

  // OK when keys are off or `authorization` is "Bearer <a key>" (the scheme in any case);
  // UNAUTHENTICATED otherwise, with a message that names the header and never the key sent.
  absl::Status Authorize(absl::string_view authorization) const;

 private:
  std::string path_;
  mutable absl::Mutex mu_;
  std::vector<std::string> keys_ ABSL_GUARDED_BY(mu_);
};

// Whether `a` equals `b`, taking time that depends on their lengths only.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace mulo::server

#endif  // MULO_SERVER_API_KEYS_H_
