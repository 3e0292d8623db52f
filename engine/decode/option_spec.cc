#include "engine/decode/option_spec.h"

#include <cmath>
#include <sstream>

namespace mulo::engine {
namespace {

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

std::string OptionSpec::Rule() const {
  if (!rule.empty()) return rule;
  if (kind == OptionKind::kChoice) return "must be " + ChoiceList();
  if (kind == OptionKind::kBoolean) return "must be true or false";
  if (std::isinf(max)) return "must be >= " + Number(min);
  return "must be in [" + Number(min) + ", " + Number(max) + "]";
}

std::string OptionSpec::ChoiceList() const {
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return list;
}

Status OptionSpec::Check(const std::string& method, double value) const {
  double low = min, high = max;
  if (kind == OptionKind::kChoice) {
    low = 0;
    high = static_cast<double>(choices.size()) - 1;
  } else if (kind == OptionKind::kBoolean) {
    low = std::max(0.0, low);
    high = std::min(1.0, high);
  }
  const bool whole = kind != OptionKind::kNumber;
  if (!std::isfinite(value) || value < low || value > high ||
      (whole && value != std::floor(value))) {
    return InvalidArgumentError(method + "." + name + ": " + Rule());
  }
  return OkStatus();
}

Status CheckOptionBounds(const std::string& method, const std::vector<OptionSpec>& options,
                         const MethodConfig& config) {
  for (const OptionSpec& option : options) {
    const double value = option.get(config);
    if (std::isnan(value)) continue;  // an unset optional
    MULO_RETURN_IF_ERROR(option.Check(method, value));
  }
  return OkStatus();
}

const OptionSpec* FindOption(const std::vector<OptionSpec>& options, const std::string& name) {
  for (const OptionSpec& option : options) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

}  // namespace mulo::engine
