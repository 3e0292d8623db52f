// The components a family.json may name, as a registry: one row per key, in load order, each
// loading its directory into the ModelSet and checking that it fits what was loaded before it
// (vocabularies, grids, condition widths). A new conditioner, drafter or head kind is its class
// plus its row here (and its slot in ModelSet); LoadModelSet and its error messages read the
// keys from this table.
#ifndef MULO_ENGINE_MODEL_FAMILY_COMPONENTS_H_
#define MULO_ENGINE_MODEL_FAMILY_COMPONENTS_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/json_fields.h"
#include "engine/model/model_set.h"

namespace mulo::engine {

// What a row's loader reads and writes.
struct ComponentLoad {
  std::string dir;  // the component's directory (<family>/<components.key>)
  const LoadOptions& options;
  const JsonFields& family;  // family.json, for errors naming its fields
  int64_t grid_size = 0;     // family.json "grid_size" (0: the target's own)
  ModelSet& set;
  // The conditioners loaded so far, in reading order (the default pipeline).
  std::vector<std::shared_ptr<const Conditioner>>& conditioners;
};

struct FamilyComponent {
  const char* key;  // in family.json "components"
  bool required;
  Status (*load)(ComponentLoad& load);
};

// Every component, in the order they load (a row may read the slots of the rows above it).
const std::vector<FamilyComponent>& FamilyComponents();

// "target, vq, ...": the keys, for messages.
std::string FamilyComponentKeys();

// Checks that an AR model (target, drafter, chain) writes the VQ's tokens and reads the text
// conditioner's features when the family has one; `role` names it in the error.
Status CheckArModel(const std::string& role, const TokenModel& model, const ModelSet& set);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_FAMILY_COMPONENTS_H_
