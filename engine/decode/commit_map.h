// The acceptance map: one byte per image token, in raster order, saying how the token was
// committed, so that a client can draw which tokens the drafts gave and which the target did
// (the playground's map; Stats::commit_map, the wire's Stats.commit_map). The codes:
//   0            the target's own draw: ar, the first token, a bonus token after a fully kept
//                draft, a parallel (ZipAR) row;
//   1            a draft rejected and the token re-drawn by the target (the residual draw, or
//                MuLo-SD's re-sample of a rejection and of its expanded neighbours);
//   1 + d        a draft kept at depth d (1 .. 126): its place in the step's chain, tree path
//                or Jacobi window (MuLo-SD's drafts all have depth 1: they are drafted at once);
//   0x80 | code  the same draft kept only thanks to a relaxation (the exact rule would have
//                rejected it: LANTERN's latent pool, GSD's groups, MuLo-SD's pooled threshold).
// Its totals are the Stats counters: codes >= 2 count accepted_tokens, those with 0x80 set
// relaxed_accepted_tokens, code 1 resampled_tokens, depth d accepted_per_position[d - 1].
#ifndef MULO_ENGINE_DECODE_COMMIT_MAP_H_
#define MULO_ENGINE_DECODE_COMMIT_MAP_H_

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mulo::engine {

inline constexpr uint8_t kCommitTarget = 0;
inline constexpr uint8_t kCommitRedrawn = 1;
inline constexpr uint8_t kCommitRelaxedBit = 0x80;
inline constexpr int64_t kCommitMaxDepth = 126;  // deeper drafts share the deepest code

// The code of a draft kept at `depth` (>= 1), relaxed or not.
inline uint8_t CommitDraftCode(int64_t depth, bool relaxed) {
  const int64_t d = std::min<int64_t>(std::max<int64_t>(depth, 1), kCommitMaxDepth);
  return static_cast<uint8_t>((1 + d) | (relaxed ? kCommitRelaxedBit : 0));
}

// A kept draft's depth (>= 1), or 0 for the target's and re-drawn tokens.
inline int64_t CommitDepth(uint8_t code) {
  const int64_t plain = code & ~kCommitRelaxedBit;
  return plain >= 2 ? plain - 1 : 0;
}

// Filled by the methods as they commit, over the image's raster positions (unmarked positions
// are the target's own draws).
class CommitMap {
 public:
  explicit CommitMap(int64_t tokens) : codes_(static_cast<size_t>(tokens), kCommitTarget) {}

  // A draft kept at raster `position` and `depth`, relaxed or not.
  void Draft(int64_t position, int64_t depth, bool relaxed = false) {
    Set(position, CommitDraftCode(depth, relaxed));
  }
  void Redrawn(int64_t position) { Set(position, kCommitRedrawn); }

  // A draft-and-verify step after `from` committed tokens: it kept `kept` drafts, in depth
  // order (chain prefix, tree path, Jacobi window), `relaxed` of them (their depths - 1, in
  // [0, kept)) only thanks to the relaxation; then its next token, at from + kept, was a
  // rejection's re-draw (`redrawn`) or the target's own (bonus).
  void Path(int64_t from, int64_t kept, const std::vector<int64_t>& relaxed, bool redrawn) {
    for (int64_t i = 0; i < kept; ++i) Draft(from + i, i + 1);
    for (int64_t i : relaxed) {
      if (i >= 0 && i < kept) Draft(from + i, i + 1, /*relaxed=*/true);
    }
    if (redrawn) Redrawn(from + kept);
  }

  const std::vector<uint8_t>& codes() const { return codes_; }

 private:
  void Set(int64_t position, uint8_t code) {
    if (position >= 0 && position < static_cast<int64_t>(codes_.size())) codes_[position] = code;
  }

  std::vector<uint8_t> codes_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_COMMIT_MAP_H_
