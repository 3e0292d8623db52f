#include "synth/heldout.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mulo::synth {

namespace {

using nlohmann::json;

absl::StatusOr<HeldoutEntry> ParseHeldoutLineImpl(absl::string_view line) {
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("held-out entry: malformed JSON");
  }
  HeldoutEntry entry;
  auto id = j.find("id");
  if (id == j.end() || !id->is_number_integer()) {
    return absl::InvalidArgumentError("held-out entry: \"id\" must be an integer");
  }
  entry.id = id->get<int>();
  auto prompt = j.find("prompt");
  if (prompt == j.end() || !prompt->is_string()) {
    return absl::InvalidArgumentError("held-out entry: \"prompt\" must be a string");
  }
  entry.prompt = prompt->get<std::string>();
  auto scene = j.find("scene");
  if (scene == j.end()) return absl::InvalidArgumentError("held-out entry: missing \"scene\"");
  auto parsed = SceneFromJson(*scene);
  if (!parsed.ok()) return parsed.status();
  entry.scene = *std::move(parsed);
  auto mismatched = j.find("mismatched");
  if (mismatched != j.end()) {
    if (!mismatched->is_object()) {
      return absl::InvalidArgumentError("held-out entry: \"mismatched\" must be an object");
    }
    for (const auto& [key, value] : mismatched->items()) {
      if (!value.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("held-out entry: mismatched \"", key, "\" is not a string"));
      }
      entry.mismatched[key] = value.get<std::string>();
    }
  }
  return entry;
}

}  // namespace

absl::StatusOr<HeldoutEntry> ParseHeldoutLine(absl::string_view line) {
  try {
    return ParseHeldoutLineImpl(line);
  } catch (const json::exception& e) {  // no exception crosses this API
    return absl::InvalidArgumentError(absl::StrCat("held-out entry: ", e.what()));
  }
}

absl::StatusOr<std::vector<HeldoutEntry>> LoadHeldoutPrompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<HeldoutEntry> entries;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    auto entry = ParseHeldoutLine(line);
    if (!entry.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": ", entry.status().message()));
    }
    entries.push_back(*std::move(entry));
  }
  return entries;
}

}  // namespace mulo::synth
