// The size of SJD-PAC's draft tree (sjd_pac.h), in one place for the engine's own bound
// (SjdPacDecoder::Validate, kMaxPacTreeNodes) and the server's (--max_tree_nodes): its first
// depth - 1 window positions branch `width` ways under every node of the level above.
#ifndef MULO_ENGINE_DECODE_PAC_TREE_SIZE_H_
#define MULO_ENGINE_DECODE_PAC_TREE_SIZE_H_

#include <cstdint>

namespace mulo::engine {

// width + width^2 + ... + width^(depth - 1) tree nodes per step (0 for depth 1). Within the
// options' ranges (width <= 16, depth <= 8) it is at most about 2.9e8.
inline int64_t PacTreeNodes(int64_t width, int64_t depth) {
  int64_t nodes = 0, level = 1;
  for (int64_t d = 1; d < depth; ++d) nodes += (level *= width);
  return nodes;
}

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_PAC_TREE_SIZE_H_
