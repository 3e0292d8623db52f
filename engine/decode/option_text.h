// A method's options as text: family.json's method_defaults objects, methods_bench's --rows
// and --mulo_grid, and the labels of its rows. All of them are read and written through the
// method's spec (option_spec.h), so none of them lists a method's options again.
#ifndef MULO_ENGINE_DECODE_OPTION_TEXT_H_
#define MULO_ENGINE_DECODE_OPTION_TEXT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/method_registry.h"

namespace mulo::engine {

// Sets the options `doc` names on `config`. `doc` is an object whose keys are the spec's
// option names, nested ones as nested objects ({"tree": {"top_k": 4}}); choices by name in any
// case ("parallel"), booleans as true / false. An object with a "tool" key records how the
// values were made (a calibration) and is not read. The option that applies first (MuLo-SD's
// preset) is applied before the others whatever the key order. Errors are INVALID_ARGUMENT
// "<source>: field '<name>': ..." for an unknown option, a wrong type or a value out of bounds.
Status ApplyOptionsJson(const MethodEntry& method, const nlohmann::json& doc,
                        const std::string& source, MethodConfig& config);

// Every option of `method` on `config` as such an object: choices in lower case; unset
// optional numbers and options that apply first (a preset) left out. ApplyOptionsJson of it
// onto any config gives `config`'s options back.
nlohmann::json OptionsJson(const MethodEntry& method, const MethodConfig& config);

// Settings written "name=value" ("k=1000", "tree.top_k=2", "init=random",
// "static_tree=true") on `config`; errors as ApplyOptionsJson's.
Status ApplyOptionAssignments(const MethodEntry& method,
                              const std::vector<std::string>& assignments,
                              const std::string& source, MethodConfig& config);

// A row's name: "lantern (k 62, delta 0.1)": the method with the values of its label options
// and of every other option whose value differs from `defaults`.
std::string OptionsLabel(const MethodEntry& method, const MethodConfig& config,
                         const MethodConfig& defaults);

// What values `option` takes, for help texts and the docs: "integer in [1, 32]", "one of
// additive, multiplicative, no_pooling", "true or false" or the option's own rule.
std::string OptionCondition(const OptionSpec& option);

// The options of `method` for help texts: "gamma (integer in [1, 32])", one per line, each
// indented by `indent`.
std::string OptionsHelp(const MethodEntry& method, const std::string& indent);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_OPTION_TEXT_H_
