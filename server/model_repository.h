// The models a server keeps resident: every subdirectory of --model_repository that holds a
// family.json, loaded once at start-up and shared read-only by all requests. A family that
// fails to load is recorded with its reason (and the server serves the others, unless asked
// to require them all); a subdirectory without a family.json is reported as skipped.
#ifndef MULO_SERVER_MODEL_REPOSITORY_H_
#define MULO_SERVER_MODEL_REPOSITORY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/api/image_engine.h"
#include "text/prompt_encoder.h"

namespace mulo::server {

class ModelRepository {
 public:
  // Loads every family under `root`. Fails when none loads, or, with `require_all`, when any
  // fails, naming each failure; otherwise the failures are kept (failed()) and logged by the
  // caller with skipped().
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Load(const std::string& root,
                                                               const engine::LoadOptions& options,
                                                               bool require_all = true);

  // The engine of the family named `name`; null when none of that name is loaded.
  const engine::ImageEngine* Find(absl::string_view name) const;
  // The family's prompt encoder (families with an MLLM stage); null otherwise.
  const text::PromptEncoder* FindPromptEncoder(absl::string_view name) const;
  std::vector<std::string> Names() const;
  // Families that did not load: name (family.json's, else the directory's) -> why.
  const std::map<std::string, std::string, std::less<>>& failed() const { return failed_; }
  // Why `name` did not load; empty when it is not a failed family.
  std::string FailureOf(absl::string_view name) const;
  // Subdirectories that hold no family.json (e.g. a conversion that failed half-way).
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  std::map<std::string, std::unique_ptr<engine::ImageEngine>, std::less<>> models_;
  std::map<std::string, std::unique_ptr<text::PromptEncoder>, std::less<>> prompt_encoders_;
  std::map<std::string, std::string, std::less<>> failed_;
  std::vector<std::string> skipped_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_MODEL_REPOSITORY_H_
