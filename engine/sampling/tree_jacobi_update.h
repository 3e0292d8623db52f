// SJD-PAC's Jacobi update after its tree is judged (sjd_pac.h), as tensor ops on the device
// where p is, with no host read, so that the tree's verification and the next window's drafts
// run in one replay of the verify graphs (tree_verify_graphs.h, Shape::jacobi; issue 61).
//
// The eager step (SjdPacDecoder's Continue) does, after the verdict:
//   - first = the kept path's length, plus one when a token follows it (the residual's draw, or
//     the bonus when a position follows the window);
//   - rows first .. length + bonus - 1 of p along the carried drafts' path are re-drawn:
//     a row that held a carried draft by MC-SJD's maximal coupling with it (maximal_coupling.h;
//     its keep test takes the acceptance stream's number after the walk's `tries`, in row
//     order), the bonus row from p; row i draws with the drafter stream's number i - first;
//   - the next window's first `levels` rows get `extras` more candidates each, drawn without
//     replacement from their p row with the row's re-draw removed (without_replacement.h), with
//     the drafter stream's numbers after the re-draws' (rows first + l, row-major).
// Here every row and level is computed whatever the verdict (a fixed set of operators), and the
// caller reads the ones its verdict makes real; given the same numbers, the eager decisions.
#ifndef MULO_ENGINE_SAMPLING_TREE_JACOBI_UPDATE_H_
#define MULO_ENGINE_SAMPLING_TREE_JACOBI_UPDATE_H_

#include <torch/types.h>

#include <cstdint>

namespace mulo::engine {

struct TreeJacobiCall {
  // [W + 1, V] float32: p after the root, then after each carried-path draft (row i: position
  // n + i); row W is the bonus position's.
  torch::Tensor p;
  torch::Tensor carried;    // int64 [W]: the carried path's drafts (pads past `length`)
  torch::Tensor carried_q;  // [W, V]: what each was drawn from
  torch::Tensor verdict;    // JudgeTree's: kept length, tries, next token, path
  torch::Tensor length;     // int64 [1]: the window's real drafts
  torch::Tensor bonus;      // int64 [1]: 1 when a position follows the window
  // float64: the acceptance stream's numbers from the walk's first ([tries + W] at least) and
  // the drafter stream's next ([W + 1 + levels * extras]).
  torch::Tensor accept_uniforms, drafter_uniforms;
  int64_t levels = 0, extras = 0;  // the next window's branching levels and their extras
};

struct TreeJacobiUpdate {
  torch::Tensor redraws;         // int64 [W + 1]: row i's re-draw (rows before `first` junk)
  torch::Tensor sibling_tokens;  // int64 [levels, extras]: rows first + l's extra candidates
  torch::Tensor sibling_valid;   // bool [levels, extras]
  torch::Tensor sibling_q;       // float32 [levels, extras, V]: what each was drawn from
};

TreeJacobiUpdate UpdateJacobiAfterTree(const TreeJacobiCall& call);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_TREE_JACOBI_UPDATE_H_
