// The one table of decoding methods. Every method the wire contract declares has an entry, its
// spec, in a file of its own (engine/decode/specs/<method>_spec.cc): its name, a one-line
// summary, the family components it needs, whether the engine implements it yet, how to build
// it from a MethodConfig, and its options with their bounds (option_spec.h). The server (request mapping, ModelInfo.methods),
// the client's help, methods_bench --methods and the README's list all read it; nothing else
// branches on method names.
#ifndef MULO_ENGINE_DECODE_METHOD_REGISTRY_H_
#define MULO_ENGINE_DECODE_METHOD_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/ar.h"
#include "engine/decode/auto_method.h"
#include "engine/decode/baseline_method.h"
#include "engine/decode/eagle.h"
#include "engine/decode/gsd.h"
#include "engine/decode/lantern.h"
#include "engine/decode/mc_sjd.h"
#include "engine/decode/mulo.h"
#include "engine/decode/option_spec.h"
#include "engine/decode/peanut.h"
#include "engine/decode/sjd.h"
#include "engine/decode/sjd_pac.h"
#include "engine/decode/speculative.h"
#include "engine/decode/zipar.h"

namespace mulo::engine {

// A request's method: its name and the options of every implemented method, each struct
// holding its paper's defaults (written there and nowhere else; DefaultMethodConfig puts a
// family's calibrated defaults over them). Only the named method's options are read.
struct MethodConfig {
  std::string name = kBaselineMethod;
  SpeculativeOptions speculative;
  MuloOptions mulo;
  EagleOptions eagle;
  LanternOptions lantern;
  LanternPlusPlusOptions lantern_plus_plus;
  PeanutMethodOptions peanut;
  SjdOptions sjd;
  GsdOptions gsd;
  ZipArOptions zipar;
  McSjdOptions mc_sjd;
  SjdPacOptions sjd_pac;
  AutoOptions automatic;  // "auto", which ResolveMethod replaces by the method it chooses
  // Set by ResolveMethod when a resolver (auto) chose this method: why.
  std::string chosen_by;
};

enum class Component { kDrafter, kChain, kUpsampler, kDownsampler, kEagle };
const char* ComponentName(Component component);
// The component's model in `models` (a TokenModel, Resampler or EagleHead), null when the
// family has none.
const void* ComponentModel(const ModelSet& models, Component component);
bool HasComponent(const ModelSet& models, Component component);

// A draft tree a method expands or verifies at every step, for a server that bounds a request's
// work (mulo_server --max_tree_nodes): the option that sets its size, as the request's field
// path ("eagle.top_k"), what the tree is, and its node count.
struct TreeDemand {
  std::string field;
  std::string what;
  int64_t nodes = 0;
};

struct MethodEntry {
  std::string name;     // on the wire (lower case), in the client and the benches
  std::string summary;  // one line for help texts
  std::vector<Component> needs;  // beyond the target and the VQ decoder every family has
  bool implemented = false;
  // Builds the method from the config's options (implemented methods only).
  std::function<std::shared_ptr<const SteppedMethod>(const MethodConfig&)> make;
  // Instead of `make`, for an entry that stands for another method (auto): the config of the
  // method it chooses for `models`, with its family defaults and `chosen_by` set.
  std::function<StatusOr<MethodConfig>(const MethodConfig&, const ModelSet&)> resolve;
  // Whether its tokens follow ar's distribution exactly at `config` (its tests prove it):
  // what `auto` may choose without a quality budget. Empty: never (relaxed methods).
  std::function<bool(const MethodConfig&)> lossless;
  // Whether it drafts and verifies (its speculative statistics mean something): false for
  // ar and ZipAR, whose drafted / accepted counts are always 0.
  bool drafts = true;
  // Its options, each named as the field of its proto message (option_spec.h): the server maps
  // requests through them and MakeMethod checks their bounds.
  std::vector<OptionSpec> options;
  // The options a row's label always shows (OptionsLabel, option_text.h); the others show
  // where they differ from the family's defaults.
  std::vector<std::string> label_options;
  // The paper's other settings that methods_bench runs beside the family default, each as
  // name=value settings of `options` (EAGLE-1's static tree beside EAGLE-2's dynamic one).
  std::vector<std::vector<std::string>> bench_variants;
  // The draft trees `config` expands or verifies per step (TreeDemands). Unset: the method
  // drafts chains or windows, bounded by its own options.
  std::function<std::vector<TreeDemand>(const MethodConfig&)> tree_demands;
  // Options it takes from another method's family defaults, set after those are read
  // (PEANUT + LANTERN pools LANTERN's neighbourhood). Unset: none.
  std::function<void(MethodConfig&)> derive_defaults;
};

// Every method the proto declares, in its order.
const std::vector<MethodEntry>& Methods();
const MethodEntry* FindMethod(const std::string& name);
// Comma-separated names of Methods(), for messages and help texts.
std::string MethodList();

// The draft trees the method `config` names expands or verifies per step; none for an unknown
// method or one without trees (EAGLE-1's and LANTERN++'s static trees are fixed).
std::vector<TreeDemand> TreeDemands(const MethodConfig& config);

// The implemented methods whose components `models` has, in registry order.
std::vector<std::string> AvailableMethods(const ModelSet& models);

// `name` with the family's defaults over the papers': family.json's "method_defaults" holds an
// object per method whose keys are its spec's options (read by ApplyOptionsJson,
// option_text.h). INVALID_ARGUMENT naming the field when they do not parse or are out of
// bounds.
StatusOr<MethodConfig> DefaultMethodConfig(const std::string& name, const ModelSet& models);

// Checks every method default the family declares (for loading a family: a bad
// family.json fails at start-up, not on the first request).
Status ValidateMethodDefaults(const ModelSet& models);

// `config` itself, or for an entry that resolves (auto) the config of the method it chooses,
// with `chosen_by` saying why.
StatusOr<MethodConfig> ResolveMethod(const MethodConfig& config, const ModelSet& models);

// The method `config` asks for (resolved first), checked once for the server and every other
// caller:
//   unknown name                        INVALID_ARGUMENT "method: unknown ..."
//   declared but not implemented yet    UNIMPLEMENTED "method: 'eagle' is not implemented yet"
//   a component missing from `models`   INVALID_ARGUMENT "method: 'mulo' needs ..."
//   an option out of range              INVALID_ARGUMENT naming it ("mulo.tau: ...")
StatusOr<std::shared_ptr<const DecodingMethod>> MakeMethod(const MethodConfig& config,
                                                           const ModelSet& models);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_METHOD_REGISTRY_H_
