// Builders for OptionSpec over a MethodConfig field, so that a method's spec file lists each
// option in one line: its name, its bounds and the field it sets.
#ifndef MULO_ENGINE_DECODE_SPECS_OPTION_BUILDERS_H_
#define MULO_ENGINE_DECODE_SPECS_OPTION_BUILDERS_H_

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/decode/method_registry.h"
#include "engine/decode/option_spec.h"

namespace mulo::engine::specs {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// Field accessors, e.g. [](MethodConfig& c) -> auto& { return c.sjd.window; }. Reads go through
// the same accessor on a const config (they never write).
template <typename T>
using Field = std::function<T&(MethodConfig&)>;

template <typename T>
T& Read(const Field<T>& field, const MethodConfig& config) {
  return field(const_cast<MethodConfig&>(config));
}

// The declaration every builder starts from; each adds its own get and set.
inline OptionSpec Declared(std::string name, OptionKind kind, double min, double max,
                           std::string rule) {
  OptionSpec o;
  o.name = std::move(name);
  o.kind = kind;
  o.min = min;
  o.max = max;
  o.rule = std::move(rule);
  return o;
}

inline OptionSpec Integer(std::string name, double min, double max, Field<int64_t> field,
                          std::string rule = "") {
  OptionSpec o = Declared(std::move(name), OptionKind::kInteger, min, max, std::move(rule));
  o.get = [field](const MethodConfig& c) { return static_cast<double>(Read(field, c)); };
  o.set = [field](MethodConfig& c, double v) { field(c) = static_cast<int64_t>(v); };
  return o;
}

inline OptionSpec Number(std::string name, double min, double max, Field<double> field,
                         std::string rule = "") {
  OptionSpec o = Declared(std::move(name), OptionKind::kNumber, min, max, std::move(rule));
  o.get = [field](const MethodConfig& c) { return Read(field, c); };
  o.set = [field](MethodConfig& c, double v) { field(c) = v; };
  return o;
}

// A number that may stay unset (the method then derives it): NaN when unset.
inline OptionSpec OptionalNumber(std::string name, double min, double max,
                                 Field<std::optional<double>> field, std::string rule = "") {
  OptionSpec o = Declared(std::move(name), OptionKind::kNumber, min, max, std::move(rule));
  o.get = [field](const MethodConfig& c) {
    const std::optional<double>& v = Read(field, c);
    return v.has_value() ? *v : std::nan("");
  };
  o.set = [field](MethodConfig& c, double v) { field(c) = v; };
  return o;
}

inline OptionSpec Boolean(std::string name, Field<bool> field) {
  OptionSpec o = Declared(std::move(name), OptionKind::kBoolean, 0, 1, "");
  o.get = [field](const MethodConfig& c) { return Read(field, c) ? 1.0 : 0.0; };
  o.set = [field](MethodConfig& c, double v) { field(c) = v != 0.0; };
  return o;
}

// choices: the proto enum's value names with the engine's values, in any order.
template <typename E>
OptionSpec Choice(std::string name, std::vector<std::pair<std::string, E>> choices,
                  Field<E> field) {
  OptionSpec o;
  o.name = std::move(name);
  o.kind = OptionKind::kChoice;
  for (const auto& [label, value] : choices) o.choices.push_back(label);
  o.get = [field, choices](const MethodConfig& c) {
    for (size_t i = 0; i < choices.size(); ++i) {
      if (choices[i].second == Read(field, c)) return static_cast<double>(i);
    }
    return -1.0;  // out of bounds: a value no choice names
  };
  o.set = [field, choices](MethodConfig& c, double v) {
    field(c) = choices[static_cast<size_t>(v)].second;
  };
  return o;
}

// EAGLE-2's tree sizes (EagleParams' total_tokens, depth, top_k) under `prefix` ("" or
// "tree."), on `tree`.
inline std::vector<OptionSpec> TreeSizeOptions(const std::string& prefix,
                                               Field<DynamicTreeOptions> tree) {
  return {
      Integer(prefix + "total_tokens", 1, kMaxTreeTokens,
              [tree](MethodConfig& c) -> int64_t& { return tree(c).total_tokens; }),
      Integer(prefix + "depth", 1, kMaxTreeDepth,
              [tree](MethodConfig& c) -> int64_t& { return tree(c).depth; }),
      Integer(prefix + "top_k", 1, kMaxTreeTopK,
              [tree](MethodConfig& c) -> int64_t& { return tree(c).top_k; }),
  };
}

// An EAGLE-2 tree's demands under the request path `prefix` ("eagle.", "lantern.tree."): the
// nodes it verifies (total_tokens) and those the head expands (depth x top_k).
inline std::vector<TreeDemand> DynamicTreeDemands(const DynamicTreeOptions& tree,
                                                  const std::string& prefix) {
  return {
      {prefix + "total_tokens", "a tree verifying total_tokens", tree.total_tokens},
      {prefix + "top_k",
       "a tree expanding depth " + std::to_string(tree.depth) + " x top_k " +
           std::to_string(tree.top_k),
       tree.depth * tree.top_k},
  };
}

// A Jacobi window's options (SjdParams / McSjdParams: window, init) on `window` and `init`.
inline std::vector<OptionSpec> JacobiWindowOptions(Field<int64_t> window, Field<JacobiInit> init) {
  return {
      Integer("window", 1, kMaxJacobiWindow, std::move(window)),
      Choice<JacobiInit>("init",
                         {{"RANDOM", JacobiInit::kRandom},
                          {"REPEAT_HORIZON", JacobiInit::kRepeatHorizon}},
                         std::move(init)),
  };
}

// EagleParams whole (static_tree and the sizes) under `prefix`, on `eagle`.
inline std::vector<OptionSpec> EagleTreeOptions(const std::string& prefix,
                                                Field<EagleOptions> eagle) {
  std::vector<OptionSpec> options = {
      Boolean(prefix + "static_tree",
              [eagle](MethodConfig& c) -> bool& { return eagle(c).static_tree; })};
  for (OptionSpec& o : TreeSizeOptions(
           prefix, [eagle](MethodConfig& c) -> DynamicTreeOptions& { return eagle(c).dynamic; })) {
    options.push_back(std::move(o));
  }
  return options;
}

}  // namespace mulo::engine::specs

#endif  // MULO_ENGINE_DECODE_SPECS_OPTION_BUILDERS_H_
