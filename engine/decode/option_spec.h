// One option of a decoding method, declared once: its name (the field's name in the method's
// proto message, nested with dots: "tree.top_k"), its kind, its bounds or choices, and how to
// read and write it on a MethodConfig. The server maps a request's method message onto a config
// through these (by field name, so the proto is the one list of names), the engine checks every
// bound from them (CheckOptionBounds), and the tests prove that every proto field has one.
#ifndef MULO_ENGINE_DECODE_OPTION_SPEC_H_
#define MULO_ENGINE_DECODE_OPTION_SPEC_H_

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

struct MethodConfig;  // method_registry.h

enum class OptionKind {
  kInteger,  // a whole number in [min, max]
  kNumber,   // a finite real number in [min, max]
  kBoolean,  // 0 or 1
  kChoice,   // an index into `choices`
};

struct OptionSpec {
  std::string name;
  OptionKind kind = OptionKind::kInteger;
  double min = 0.0;
  double max = std::numeric_limits<double>::infinity();
  // kChoice: the proto enum's value names in the engine's order (its UNSPECIFIED value, 0,
  // keeps the default and is not listed).
  std::vector<std::string> choices;
  // Applied before the other options of its message (MuLo-SD's preset replaces them all).
  bool applies_first = false;
  // What a value out of bounds is told (default "must be in [min, max]").
  std::string rule;
  // The value in `config`; NaN when an optional option is unset (never out of bounds).
  std::function<double(const MethodConfig&)> get;
  std::function<void(MethodConfig&, double)> set;

  // "must be in [1, 64]" (or the rule).
  std::string Rule() const;
  // kChoice: "A, B or C".
  std::string ChoiceList() const;
  // INVALID_ARGUMENT "<method>.<name>: <rule>" when `value` is out of bounds, not whole (for
  // integers, booleans and choices) or not a number.
  Status Check(const std::string& method, double value) const;
};

// Every option of `options` on `config` within its bounds (INVALID_ARGUMENT naming the first
// that is not, as "<method>.<name>"); unset optionals (NaN) pass.
Status CheckOptionBounds(const std::string& method, const std::vector<OptionSpec>& options,
                         const MethodConfig& config);

const OptionSpec* FindOption(const std::vector<OptionSpec>& options, const std::string& name);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_OPTION_SPEC_H_
