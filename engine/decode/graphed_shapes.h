// The step shapes a family's requests take by default, read through the method registry (each
// method's options with the family's family.json method_defaults over them, parsed by the
// methods' specs), so that the worker's pools capture their step graphs for exactly those
// (kv_pools.h). The pools cannot ask the registry themselves: every method's session reaches
// them.
#ifndef MULO_ENGINE_DECODE_GRAPHED_SHAPES_H_
#define MULO_ENGINE_DECODE_GRAPHED_SHAPES_H_

#include <string>

#include "engine/core/status.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"

namespace mulo::engine {

// The shapes of `config`'s options (a family's defaults) over `models`.
KvPools::GraphedShapes GraphedShapesOf(const MethodConfig& config, const ModelSet& models);

// A family for KvPools::Make, named `name`, with the shapes of its default method options.
// An error for a family.json whose method_defaults do not parse (ValidateMethodDefaults).
StatusOr<KvPools::Family> PoolFamily(std::string name, const ModelSet& models);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_GRAPHED_SHAPES_H_
