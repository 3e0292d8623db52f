#include "server/batch_policy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/decode/method_registry.h"

namespace mulo::server {

BatchPolicy BatchPolicy::All() {
  BatchPolicy policy;
  policy.all_ = true;
  return policy;
}

absl::StatusOr<BatchPolicy> BatchPolicy::Parse(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text == "all") return All();
  BatchPolicy policy;
  if (text == "none") return policy;
  for (absl::string_view name : absl::StrSplit(text, ',')) {
    name = absl::StripAsciiWhitespace(name);
    if (engine::FindMethod(std::string(name)) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batch_methods: unknown method \"", name, "\" (expected all, none or ",
                       "a comma list of ", engine::MethodList(), ")"));
    }
    policy.methods_.emplace(name);
  }
  return policy;
}

bool BatchPolicy::Batches(absl::string_view method) const {
  return all_ || methods_.find(method) != methods_.end();
}

std::string BatchPolicy::ToString() const {
  if (all_) return "all";
  std::string names;
  for (const engine::MethodEntry& entry : engine::Methods()) {
    if (Batches(entry.name)) absl::StrAppend(&names, names.empty() ? "" : ",", entry.name);
  }
  return names.empty() ? "none" : names;
}

}  // namespace mulo::server
