#include "server/model_repository.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/decode/method_registry.h"

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

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Load(
    const std::string& root, const engine::LoadOptions& options) {
  std::error_code error;
  if (!std::filesystem::is_directory(root, error)) {
    return absl::NotFoundError(absl::StrCat("model repository '", root, "' is not a directory"));
  }
  auto repository = std::unique_ptr<ModelRepository>(new ModelRepository());
  std::vector<std::string> failures;
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "family.json")) {
      dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    auto models = engine::LoadModelSet(dir.string(), options);
    if (!models.ok()) {
      failures.push_back(models.status().ToString());
      continue;
    }
    if (auto defaults = engine::ValidateMethodDefaults(*models); !defaults.ok()) {
      failures.push_back(defaults.ToString());
      continue;
    }
    const std::string name = models->name;
    if (repository->models_.count(name)) {
      failures.push_back(absl::StrCat(dir.string(), ": duplicate model name '", name, "'"));
      continue;
    }
    auto encoder = PromptEncoder::ForFamily(dir.string(), *models);
    if (!encoder.ok()) {
      failures.push_back(std::string(encoder.status().message()));
      continue;
    }
    if (*encoder != nullptr) repository->prompt_encoders_[name] = *std::move(encoder);
    repository->models_[name] = std::make_unique<engine::ModelSet>(std::move(*models));
  }
  if (!failures.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model repository '", root, "': ", absl::StrJoin(failures, "; ")));
  }
  if (repository->models_.empty()) {
    return absl::NotFoundError(
        absl::StrCat("model repository '", root, "' holds no directory with a family.json"));
  }
  return repository;
}

const PromptEncoder* ModelRepository::FindPromptEncoder(absl::string_view name) const {
  auto it = prompt_encoders_.find(name);
  return it == prompt_encoders_.end() ? nullptr : it->second.get();
}

const engine::ModelSet* ModelRepository::Find(absl::string_view name) const {
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second.get();
}

std::vector<std::string> ModelRepository::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, models] : models_) names.push_back(name);
  return names;
}

}  // namespace mulo::server
