#include "server/model_repository.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mulo::server {

namespace {

// The name a family.json gives itself, else its directory's name (for a family that failed).
std::string FamilyNameOf(const std::filesystem::path& dir) {
  std::ifstream in(dir / "family.json");
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("name") && doc["name"].is_string() &&
      !doc["name"].get<std::string>().empty()) {
    return doc["name"].get<std::string>();
  }
  return dir.filename().string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Load(
    const std::string& root, const engine::LoadOptions& options, bool require_all) {
  std::error_code error;
  if (!std::filesystem::is_directory(root, error)) {
    return absl::NotFoundError(absl::StrCat("model repository '", root, "' is not a directory"));
  }
  auto repository = std::unique_ptr<ModelRepository>(new ModelRepository());
  std::vector<std::string> failures;
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
    if (!entry.is_directory()) continue;
    if (std::filesystem::exists(entry.path() / "family.json")) {
      dirs.push_back(entry.path());
    } else {
      repository->skipped_.push_back(entry.path().string());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  std::sort(repository->skipped_.begin(), repository->skipped_.end());
  for (const auto& dir : dirs) {
    const auto fail = [&](const std::string& why) {
      failures.push_back(absl::StrCat(dir.string(), ": ", why));
      repository->failed_[FamilyNameOf(dir)] = why;
    };
    auto engine = engine::ImageEngine::Load(dir.string(), options);
    if (!engine.ok()) {
      fail(engine.status().ToString());
      continue;
    }
    const std::string name = (*engine)->models().name;
    if (repository->models_.count(name)) {
      failures.push_back(absl::StrCat(dir.string(), ": duplicate model name '", name, "'"));
      continue;
    }
    auto encoder = text::PromptEncoder::ForFamily(dir.string(), (*engine)->models());
    if (!encoder.ok()) {
      fail(std::string(encoder.status().message()));
      continue;
    }
    if (*encoder != nullptr) repository->prompt_encoders_[name] = *std::move(encoder);
    repository->models_[name] = std::move(engine).value();
  }
  if (!failures.empty() && (require_all || repository->models_.empty())) {
    return absl::FailedPreconditionError(
        absl::StrCat("model repository '", root, "': ", absl::StrJoin(failures, "; ")));
  }
  if (repository->models_.empty()) {
    return absl::NotFoundError(
        absl::StrCat("model repository '", root, "' holds no directory with a family.json"));
  }
  return repository;
}

std::string ModelRepository::FailureOf(absl::string_view name) const {
  auto it = failed_.find(name);
  return it == failed_.end() ? std::string() : it->second;
}

const text::PromptEncoder* ModelRepository::FindPromptEncoder(absl::string_view name) const {
  auto it = prompt_encoders_.find(name);
  return it == prompt_encoders_.end() ? nullptr : it->second.get();
}

const engine::ImageEngine* ModelRepository::Find(absl::string_view name) const {
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second.get();
}

std::vector<std::string> ModelRepository::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, models] : models_) names.push_back(name);
  return names;
}

}  // namespace mulo::server
