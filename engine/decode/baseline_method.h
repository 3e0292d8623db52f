// The method every family runs and every other method is measured against: plain
// autoregressive decoding, one target forward per token. A request that names no method gets it
// (the server's --default_method default), and it is what `auto` falls back to.
#ifndef MULO_ENGINE_DECODE_BASELINE_METHOD_H_
#define MULO_ENGINE_DECODE_BASELINE_METHOD_H_

namespace mulo::engine {

inline constexpr char kBaselineMethod[] = "ar";

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_BASELINE_METHOD_H_
