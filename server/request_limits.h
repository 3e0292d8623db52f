// The server's bounds on one request's work, whatever its client asks for: how long it may
// decode, and how large a draft tree it may ask to be drafted and verified at every step. A
// request within the API's ranges can still hold a worker for long (EAGLE's largest tree,
// 256 / 32 / 64, took 26 s for one 16 x 16 image of the bundled family against 1.3 s for
// EAGLE-2's 60 / 7 / 10); these bounds say no at once, or stop it, with an error naming the
// field or the flag.
#ifndef MULO_SERVER_REQUEST_LIMITS_H_
#define MULO_SERVER_REQUEST_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/request_validation.h"

namespace mulo::server {

// mulo_server's defaults. 512 tree nodes admit EAGLE-2's tree (7 x 10, 60 verified) and
// PEANUT's widest LlamaGen range (9 x 39), and cost at most about 6x EAGLE-2's decode time on
// the bundled family (8.2 s for 8 x 64 against 1.3 s; the API's largest, 32 x 64, took 26 s).
// 300 s is far above any bundled-family image on this CPU (under 10 s) and an H100's Tar
// images; full-size replicas on a CPU take minutes and their benches turn it off.
inline constexpr absl::Duration kDefaultMaxDecodeTime = absl::Seconds(300);
inline constexpr int64_t kDefaultMaxTreeNodes = 512;

struct RequestLimits {
  // --max_decode_time: the longest a request may decode, from when a worker starts it;
  // InfiniteDuration = no limit.
  absl::Duration max_decode_time = kDefaultMaxDecodeTime;
  // --max_tree_nodes: the most draft-tree nodes a tree method may expand per step (depth x
  // top_k, the head's work) or verify per step (total_tokens, the target's; SJD-PAC's tree of
  // width + ... + width^(depth - 1) candidates); 0 = no bound.
  int64_t max_tree_nodes = kDefaultMaxTreeNodes;
};

// OK, or INVALID_ARGUMENT naming the request's field and the flag.
absl::Status CheckRequestLimits(const ValidatedRequest& request, const RequestLimits& limits);

}  // namespace mulo::server

#endif  // MULO_SERVER_REQUEST_LIMITS_H_
