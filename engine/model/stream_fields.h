// The columns every pool graph's upload starts with (row_graphs.h, verify_graphs.h,
// mulo_verify_graphs.h): per guidance stream its slot, its cache length and the first and last
// sequence positions its rows take, each column `streams` wide.
#ifndef MULO_ENGINE_MODEL_STREAM_FIELDS_H_
#define MULO_ENGINE_MODEL_STREAM_FIELDS_H_

#include <cstdint>

#include "engine/model/kv_cache.h"

namespace mulo::engine {

// Request r's two streams (conditional, unconditional: slots first_slot() and the next) into
// the first four columns of `ints`, laid out column by column over `streams`.
inline void PutStreamFields(const KvCache& cache, int64_t first_position, int64_t last_position,
                            int64_t r, int64_t streams, int64_t* ints) {
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t s = 2 * r + b;
    ints[s] = cache.first_slot() + b;
    ints[streams + s] = cache.length();
    ints[2 * streams + s] = first_position;
    ints[3 * streams + s] = last_position;
  }
}

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_STREAM_FIELDS_H_
