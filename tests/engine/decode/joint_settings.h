// The settings the exact-joint tests run each method at (exact_joint_test.cc), and the broken
// rules their controls swap in, as exact-law rules (exact_laws.h). Chosen so that what each
// control breaks happens often on a 2 x 2 grid of 3 tokens: windows short enough that a draft
// is coupled more than once, initial drafts from the row above (repeat_horizon: carried
// drafts with a q that is not one-hot appear early), SJD-PAC and EAGLE-2 trees narrower than
// the vocabulary (so that the first kept sibling and the longest kept path differ). The table
// search (table_search.cc) makes the table hard for exactly these.
#ifndef MULO_TESTS_ENGINE_DECODE_JOINT_SETTINGS_H_
#define MULO_TESTS_ENGINE_DECODE_JOINT_SETTINGS_H_

#include <string>
#include <vector>

#include "tests/engine/decode/exact_laws.h"
#include "tests/engine/decode/table_law.h"

namespace mulo::engine::testing {

constexpr int64_t kJointVocab = 3;
constexpr int64_t kJointGrid = 2;

// The methods' settings.
constexpr int64_t kSpeculativeGamma = 3;
constexpr int64_t kSjdWindow = 3;
constexpr int64_t kMcSjdWindow = 3;
constexpr int64_t kPacWindow = 2, kPacWidth = 2, kPacDepth = 3;
constexpr int64_t kEagle2Tokens = 6, kEagle2Depth = 2, kEagle2TopK = 2;

inline JacobiRule SjdRule() {
  JacobiRule r;
  r.window = kSjdWindow;
  return r;
}
inline JacobiRule McSjdRule() {
  JacobiRule r;
  r.window = kMcSjdWindow;
  r.coupling = true;
  r.repeat_horizon = true;
  return r;
}
inline JacobiRule SjdPacRule() {
  JacobiRule r;
  r.window = kPacWindow;
  r.coupling = true;
  r.repeat_horizon = true;
  r.width = kPacWidth;
  r.depth = kPacDepth;
  return r;
}
inline TreeRule Eagle1Rule() {
  TreeRule r;
  r.static_tree = true;
  return r;
}
inline TreeRule Eagle2Rule() {
  TreeRule r;
  r.total_tokens = kEagle2Tokens;
  r.depth = kEagle2Depth;
  r.top_k = kEagle2TopK;
  return r;
}

// A family's three tables: the target, the chain draft model, the EAGLE head.
struct JointTables {
  TableLaw target, chain, head;
};

// One broken rule and its exact law on `tables`.
struct Control {
  std::string name;
  std::function<Law(const JointTables&)> law;
};

// Every control of the exact-joint tests whose law the enumeration gives.
inline std::vector<Control> JointControls() {
  auto jacobi = [](JacobiRule rule, BrokenRules broken) {
    rule.broken = broken;
    return [rule](const JointTables& t) { return JacobiLaw(t.target, rule); };
  };
  auto tree = [](TreeRule rule, BrokenRules broken) {
    rule.broken = broken;
    return [rule](const JointTables& t) { return EagleLaw(t.target, t.head, rule); };
  };
  BrokenRules residual, moved, old_q, siblings, longest;
  residual.residual_from_p = true;
  moved.coupled_residual_from_p = true;
  old_q.old_q_for_kept = true;
  siblings.siblings_without_removal = true;
  longest.longest_path = true;
  return {
      {"speculative, residual replaced by p",
       [residual](const JointTables& t) {
         return SpeculativeLaw(t.target, t.chain, kSpeculativeGamma, residual);
       }},
      {"eagle (EAGLE-1), residual replaced by p", tree(Eagle1Rule(), residual)},
      {"eagle (EAGLE-2), residual replaced by p", tree(Eagle2Rule(), residual)},
      {"eagle (EAGLE-2), longest kept path", tree(Eagle2Rule(), longest)},
      {"sjd, rejection re-drawn from p", jacobi(SjdRule(), residual)},
      {"mc_sjd, SCD's q rule (old q kept)", jacobi(McSjdRule(), old_q)},
      {"mc_sjd, moved draft re-drawn from p", jacobi(McSjdRule(), moved)},
      {"sjd_pac, SCD's q rule (old q kept)", jacobi(SjdPacRule(), old_q)},
      {"sjd_pac, siblings judged without the removals", jacobi(SjdPacRule(), siblings)},
      {"sjd_pac, longest kept path", jacobi(SjdPacRule(), longest)},
  };
}

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_DECODE_JOINT_SETTINGS_H_
