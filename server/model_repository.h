// The models a server keeps resident: every subdirectory of --model_repository that holds a
// family.json, loaded once at start-up and shared read-only by all requests.
#ifndef MULO_SERVER_MODEL_REPOSITORY_H_
#define MULO_SERVER_MODEL_REPOSITORY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model_set.h"
#include "server/prompt_encoder.h"

namespace mulo::server {

class ModelRepository {
 public:
  // Loads every family under `root`; fails if none loads, naming each failure.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Load(const std::string& root,
                                                               const engine::LoadOptions& options);

  // Null when no model of that name is loaded.
  const engine::ModelSet* Find(absl::string_view name) const;
  // The family's prompt encoder (families with an MLLM stage); null otherwise.
  const PromptEncoder* FindPromptEncoder(absl::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, std::unique_ptr<engine::ModelSet>, std::less<>> models_;
  std::map<std::string, std::unique_ptr<PromptEncoder>, std::less<>> prompt_encoders_;
};

// engine::Status -> absl::Status, keeping the code and message.
absl::Status ToAbsl(const engine::Status& status);

}  // namespace mulo::server

#endif  // MULO_SERVER_MODEL_REPOSITORY_H_
