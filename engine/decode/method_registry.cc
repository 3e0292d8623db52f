#include "engine/decode/method_registry.h"

#include "engine/decode/option_text.h"
#include "engine/decode/specs/method_specs.h"

namespace mulo::engine {
namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return list;
}

std::vector<MethodEntry> BuildTable() {
  return {specs::ArSpec(),     specs::SpeculativeSpec(),     specs::MuloSpec(),
          specs::EagleSpec(),  specs::LanternSpec(),         specs::LanternPlusPlusSpec(),
          specs::PeanutSpec(), specs::SjdSpec(),             specs::GsdSpec(),
          specs::ZipArSpec(),  specs::McSjdSpec(),           specs::SjdPacSpec(),
          specs::AutoSpec()};
}

}  // namespace

const char* ComponentName(Component component) {
  switch (component) {
    case Component::kDrafter: return "drafter";
    case Component::kChain: return "chain";
    case Component::kUpsampler: return "upsampler";
    case Component::kDownsampler: return "downsampler";
    case Component::kEagle: return "eagle";
  }
  return "unknown";
}

const void* ComponentModel(const ModelSet& models, Component component) {
  switch (component) {
    case Component::kDrafter: return models.drafter.get();
    case Component::kChain: return models.chain.get();
    case Component::kUpsampler: return models.upsampler.get();
    case Component::kDownsampler: return models.downsampler.get();
    case Component::kEagle: return models.eagle.get();
  }
  return nullptr;
}

bool HasComponent(const ModelSet& models, Component component) {
  return ComponentModel(models, component) != nullptr;
}

const std::vector<MethodEntry>& Methods() {
  static const auto* table = new std::vector<MethodEntry>(BuildTable());
  return *table;
}

const MethodEntry* FindMethod(const std::string& name) {
  for (const MethodEntry& entry : Methods()) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

std::string MethodList() {
  std::vector<std::string> names;
  for (const MethodEntry& entry : Methods()) names.push_back(entry.name);
  return Join(names);
}

std::vector<TreeDemand> TreeDemands(const MethodConfig& config) {
  const MethodEntry* entry = FindMethod(config.name);
  if (entry == nullptr || !entry->tree_demands) return {};
  return entry->tree_demands(config);
}

std::vector<std::string> AvailableMethods(const ModelSet& models) {
  std::vector<std::string> names;
  for (const MethodEntry& entry : Methods()) {
    bool has_all = entry.implemented;
    for (Component c : entry.needs) has_all = has_all && HasComponent(models, c);
    if (has_all) names.push_back(entry.name);
  }
  return names;
}

StatusOr<MethodConfig> DefaultMethodConfig(const std::string& name, const ModelSet& models) {
  MethodConfig config;
  config.name = name;
  for (const auto& item : models.method_defaults.items()) {
    const MethodEntry* entry = FindMethod(item.key());
    if (entry == nullptr) {
      return InvalidArgumentError(models.name + " family.json method_defaults: unknown method '" +
                                  item.key() + "' (" + MethodList() + ")");
    }
    MULO_RETURN_IF_ERROR(ApplyOptionsJson(
        *entry, item.value(), models.name + " family.json method_defaults." + entry->name,
        config));
  }
  for (const MethodEntry& entry : Methods()) {
    if (entry.derive_defaults) entry.derive_defaults(config);
  }
  return config;
}

Status ValidateMethodDefaults(const ModelSet& models) {
  MULO_ASSIGN_OR_RETURN(MethodConfig config, DefaultMethodConfig(kBaselineMethod, models));
  // Each option was checked against its spec's bounds as it was read; what the methods check
  // across options (PEANUT's open depth bounds) they check in Validate.
  // (FAILED_PRECONDITION, what the family's models lack, is each request's to report.)
  for (const std::string& name : AvailableMethods(models)) {
    const MethodEntry& entry = *FindMethod(name);
    config.name = name;
    Status valid = entry.make ? entry.make(config)->Validate(models)
                              : ResolveMethod(config, models).status();
    if (valid.code() == StatusCode::kInvalidArgument ||
        (!entry.make && !valid.ok())) {  // a resolver's table is the family's to fix
      return InvalidArgumentError(models.name + " family.json method_defaults: " +
                                  valid.message());
    }
  }
  return OkStatus();
}

StatusOr<MethodConfig> ResolveMethod(const MethodConfig& config, const ModelSet& models) {
  const MethodEntry* entry = FindMethod(config.name);
  if (entry == nullptr || !entry->resolve) return config;
  MULO_RETURN_IF_ERROR(CheckOptionBounds(entry->name, entry->options, config));
  return entry->resolve(config, models);
}

StatusOr<std::shared_ptr<const DecodingMethod>> MakeMethod(const MethodConfig& requested,
                                                           const ModelSet& models) {
  MULO_ASSIGN_OR_RETURN(const MethodConfig config, ResolveMethod(requested, models));
  const MethodEntry* entry = FindMethod(config.name);
  if (entry == nullptr) {
    return InvalidArgumentError("method: unknown '" + config.name + "' (" + MethodList() + ")");
  }
  if (!entry->implemented) {
    return UnimplementedError("method: '" + entry->name +
                              "' is declared in the API but not implemented yet");
  }
  for (Component c : entry->needs) {
    if (!HasComponent(models, c)) {
      return InvalidArgumentError("method: '" + entry->name + "' needs the family's " +
                                  ComponentName(c) + ", which model '" + models.name +
                                  "' does not have (available: " +
                                  Join(AvailableMethods(models)) + ")");
    }
  }
  MULO_RETURN_IF_ERROR(CheckOptionBounds(entry->name, entry->options, config));
  std::shared_ptr<const SteppedMethod> method = entry->make(config);
  MULO_RETURN_IF_ERROR(method->Validate(models));
  return std::shared_ptr<const DecodingMethod>(std::move(method));
}

}  // namespace mulo::engine
