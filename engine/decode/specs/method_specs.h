// Each method's spec (its MethodEntry), one file per method; Methods() lists them in the wire
// contract's order.
#ifndef MULO_ENGINE_DECODE_SPECS_METHOD_SPECS_H_
#define MULO_ENGINE_DECODE_SPECS_METHOD_SPECS_H_

#include "engine/decode/method_registry.h"

namespace mulo::engine::specs {

MethodEntry ArSpec();
MethodEntry SpeculativeSpec();
MethodEntry MuloSpec();
MethodEntry EagleSpec();
MethodEntry LanternSpec();
MethodEntry LanternPlusPlusSpec();
MethodEntry PeanutSpec();
MethodEntry SjdSpec();
MethodEntry GsdSpec();
MethodEntry ZipArSpec();
MethodEntry McSjdSpec();
MethodEntry SjdPacSpec();
MethodEntry AutoSpec();

}  // namespace mulo::engine::specs

#endif  // MULO_ENGINE_DECODE_SPECS_METHOD_SPECS_H_
