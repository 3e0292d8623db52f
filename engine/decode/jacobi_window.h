// The Jacobi window of SJD and its descendants (sjd.h, mc_sjd.h, sjd_pac.h): the drafts that
// sit past the committed prefix, each with the distribution it was drawn from.
#ifndef MULO_ENGINE_DECODE_JACOBI_WINDOW_H_
#define MULO_ENGINE_DECODE_JACOBI_WINDOW_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "engine/decode/session.h"

namespace mulo::engine {

// How the window's new positions are initialised (the proto's SjdParams.Init).
enum class JacobiInit {
  kRandom,         // a uniformly random token (the papers' default)
  kRepeatHorizon,  // the token one row up (committed or still a draft); random in row 0
};
const char* JacobiInitName(JacobiInit init);

struct JacobiWindow {
  std::vector<int64_t> tokens;   // token i at raster position committed + i
  std::vector<torch::Tensor> q;  // [V] each: the distribution token i was drawn from
};

// Cuts `window` to `length` drafts or tops it up to `length` with new initial tokens after the
// committed tokens `x`, each with a one-hot q (a fixed token is a valid proposal: the test
// keeps it with probability p(x)). Random tokens take the drafter stream's numbers.
void FillJacobiWindow(DecodeSession& session, JacobiInit init, const std::vector<int64_t>& x,
                      int64_t length, JacobiWindow& window);
// FillJacobiWindow's tokens alone (the same tokens and numbers): `tokens` cut or topped up to
// `length`, for a caller that makes the new tokens' one-hot q itself (verify_graphs.h does it
// inside its graph).
void FillJacobiTokens(DecodeSession& session, JacobiInit init, const std::vector<int64_t>& x,
                      int64_t length, std::vector<int64_t>& tokens);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_JACOBI_WINDOW_H_
