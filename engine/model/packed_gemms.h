// How a batched forward (several requests' calls in one, see EngineLoop) runs its
// arithmetic: grouped per request, so that each request's numbers are bit for bit those of its
// lone call on a CPU in float32, or shared over the whole batch (fewer, larger GEMMs and
// convolutions; the last bits may differ, the README's tolerance policy).
#ifndef MULO_ENGINE_MODEL_PACKED_GEMMS_H_
#define MULO_ENGINE_MODEL_PACKED_GEMMS_H_

namespace mulo::engine {

enum class PackedGemms { kShared, kPerSequence };

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_PACKED_GEMMS_H_
