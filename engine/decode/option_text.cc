#include "engine/decode/option_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace mulo::engine {
namespace {

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string joined;
  for (const std::string& part : parts) joined += (joined.empty() ? "" : ", ") + part;
  return joined;
}

// A choice option's names as the text forms take them: "additive, multiplicative, no_pooling".
std::string ChoiceNames(const OptionSpec& o) {
  std::vector<std::string> names;
  for (const std::string& choice : o.choices) names.push_back(Lower(choice));
  return Join(names);
}

std::string OptionNames(const MethodEntry& method) {
  std::vector<std::string> names;
  for (const OptionSpec& o : method.options) names.push_back(o.name);
  return names.empty() ? "it has none" : Join(names);
}

Status FieldError(const std::string& source, const std::string& name,
                  const std::string& problem) {
  return InvalidArgumentError(source + ": field '" + name + "': " + problem);
}

// The value `json` gives option `o` (a choice's index, a boolean's 0 or 1), unchecked.
StatusOr<double> ValueOf(const OptionSpec& o, const nlohmann::json& json,
                         const std::string& source) {
  switch (o.kind) {
    case OptionKind::kChoice: {
      if (json.is_string()) {
        const std::string wanted = Lower(json.get<std::string>());
        for (size_t i = 0; i < o.choices.size(); ++i) {
          if (Lower(o.choices[i]) == wanted) return static_cast<double>(i);
        }
      }
      return FieldError(source, o.name, "must be one of " + ChoiceNames(o));
    }
    case OptionKind::kBoolean:
      if (json.is_boolean()) return json.get<bool>() ? 1.0 : 0.0;
      return FieldError(source, o.name, "must be true or false");
    case OptionKind::kInteger:
    case OptionKind::kNumber:
      if (json.is_number()) return json.get<double>();
      return FieldError(source, o.name, "must be a number");
  }
  return FieldError(source, o.name, "has an unknown kind");
}

Status SetChecked(const MethodEntry& method, const OptionSpec& o, double value,
                  const std::string& source, MethodConfig& config) {
  if (!o.Check(method.name, value).ok()) return FieldError(source, o.name, o.Rule());
  o.set(config, value);
  return OkStatus();
}

using Setting = std::pair<const OptionSpec*, nlohmann::json>;

// The options `doc` sets under `prefix` ("" or "tree."), in `doc`'s order.
Status Collect(const MethodEntry& method, const nlohmann::json& doc, const std::string& prefix,
               const std::string& source, std::vector<Setting>& settings) {
  if (!doc.is_object()) {
    return FieldError(source, prefix.empty() ? method.name : prefix.substr(0, prefix.size() - 1),
                      "must be an object of options");
  }
  for (const auto& item : doc.items()) {
    const std::string name = prefix + item.key();
    if (const OptionSpec* o = FindOption(method.options, name)) {
      settings.emplace_back(o, item.value());
      continue;
    }
    if (item.value().is_object()) {
      if (item.value().contains("tool")) continue;  // how the values were made, not an option
      const bool group = std::any_of(
          method.options.begin(), method.options.end(),
          [&](const OptionSpec& o) { return o.name.rfind(name + ".", 0) == 0; });
      if (group) {
        MULO_RETURN_IF_ERROR(Collect(method, item.value(), name + ".", source, settings));
        continue;
      }
    }
    return FieldError(source, name,
                      "not an option of " + method.name + " (" + OptionNames(method) + ")");
  }
  return OkStatus();
}

// Sets `settings` on `config`, the option that applies first (a preset) before the others.
Status Apply(const MethodEntry& method, std::vector<Setting> settings, const std::string& source,
             MethodConfig& config) {
  std::stable_partition(settings.begin(), settings.end(),
                        [](const Setting& s) { return s.first->applies_first; });
  for (const auto& [option, json] : settings) {
    MULO_ASSIGN_OR_RETURN(double value, ValueOf(*option, json, source));
    MULO_RETURN_IF_ERROR(SetChecked(method, *option, value, source, config));
  }
  return OkStatus();
}

// `value` as a label or a JSON value shows it.
std::string Text(const OptionSpec& o, double value) {
  switch (o.kind) {
    case OptionKind::kChoice:
      return value >= 0 && value < o.choices.size() ? Lower(o.choices[value]) : "?";
    case OptionKind::kBoolean:
      return value != 0 ? "true" : "false";
    default: {
      std::ostringstream out;
      out << value;
      return out.str();
    }
  }
}

bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

}  // namespace

Status ApplyOptionsJson(const MethodEntry& method, const nlohmann::json& doc,
                        const std::string& source, MethodConfig& config) {
  std::vector<Setting> settings;
  MULO_RETURN_IF_ERROR(Collect(method, doc, "", source, settings));
  return Apply(method, std::move(settings), source, config);
}

nlohmann::json OptionsJson(const MethodEntry& method, const MethodConfig& config) {
  nlohmann::json doc = nlohmann::json::object();
  for (const OptionSpec& o : method.options) {
    const double value = o.get(config);
    if (o.applies_first || std::isnan(value)) continue;
    nlohmann::json json;
    switch (o.kind) {
      case OptionKind::kChoice: json = Text(o, value); break;
      case OptionKind::kBoolean: json = value != 0; break;
      case OptionKind::kInteger: json = static_cast<int64_t>(value); break;
      case OptionKind::kNumber: json = value; break;
    }
    nlohmann::json* at = &doc;
    std::string rest = o.name;
    for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
      at = &(*at)[rest.substr(0, dot)];
    }
    (*at)[rest] = std::move(json);
  }
  return doc;
}

Status ApplyOptionAssignments(const MethodEntry& method,
                              const std::vector<std::string>& assignments,
                              const std::string& source, MethodConfig& config) {
  std::vector<Setting> settings;
  for (const std::string& assignment : assignments) {
    const size_t equals = assignment.find('=');
    const std::string name = assignment.substr(0, equals);
    const OptionSpec* o = FindOption(method.options, name);
    if (o == nullptr) {
      return FieldError(source, name,
                        "not an option of " + method.name + " (" + OptionNames(method) + ")");
    }
    if (equals == std::string::npos) return FieldError(source, name, "expected name=value");
    const std::string text = assignment.substr(equals + 1);
    nlohmann::json json = text;  // a choice's name
    if (o->kind == OptionKind::kBoolean && (text == "true" || text == "false")) {
      json = text == "true";
    } else if (o->kind == OptionKind::kInteger || o->kind == OptionKind::kNumber) {
      char* end = nullptr;
      const double number = std::strtod(text.c_str(), &end);
      if (!text.empty() && end == text.c_str() + text.size()) json = number;
    }
    settings.emplace_back(o, std::move(json));
  }
  return Apply(method, std::move(settings), source, config);
}

std::string OptionsLabel(const MethodEntry& method, const MethodConfig& config,
                         const MethodConfig& defaults) {
  std::vector<std::string> parts;
  for (const OptionSpec& o : method.options) {
    if (o.applies_first) continue;
    const double value = o.get(config);
    const bool labelled = std::find(method.label_options.begin(), method.label_options.end(),
                                    o.name) != method.label_options.end();
    if (std::isnan(value) || (!labelled && Same(value, o.get(defaults)))) continue;
    parts.push_back(o.name + " " + Text(o, value));
  }
  return parts.empty() ? method.name : method.name + " (" + Join(parts) + ")";
}

std::string OptionCondition(const OptionSpec& o) {
  if (o.kind == OptionKind::kChoice) return "one of " + ChoiceNames(o);
  std::string condition = o.Rule();  // "must be in [1, 32]", or the option's own rule
  if (condition.rfind("must be ", 0) == 0) condition = condition.substr(8);
  if (condition.rfind("a ", 0) == 0) return condition;  // "a finite number >= 0"
  const char* kind = o.kind == OptionKind::kInteger  ? "integer "
                     : o.kind == OptionKind::kNumber ? "number "
                                                     : "";
  return kind + condition;
}

std::string OptionsHelp(const MethodEntry& method, const std::string& indent) {
  std::string help;
  for (const OptionSpec& o : method.options) {
    help += indent + o.name + " (" + OptionCondition(o) + ")\n";
  }
  return help;
}

}  // namespace mulo::engine
