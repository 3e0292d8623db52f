#include "tests/engine/decode/exact_laws.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "engine/decode/draft_tree.h"
#include "engine/decode/dynamic_tree.h"

namespace mulo::engine::testing {
namespace {

using Dist = std::vector<double>;

Dist Uniform(int64_t vocab) { return Dist(vocab, 1.0 / static_cast<double>(vocab)); }

Dist OneHot(int64_t vocab, int64_t token) {
  Dist d(vocab, 0.0);
  d[token] = 1.0;
  return d;
}

// norm(max(p - q, 0)); p itself where that has no mass (then p = q and it is never drawn).
Dist Residual(const Dist& p, const Dist& q) {
  Dist r(p.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += (r[i] = std::max(p[i] - q[i], 0.0));
  if (total <= 0) return p;
  for (double& v : r) v /= total;
  return r;
}

// q without `removed`, renormalised (a draw without replacement after them); empty when no
// mass is left.
Dist Without(const Dist& q, const std::vector<int64_t>& removed) {
  Dist d = q;
  for (int64_t t : removed) d[t] = 0;
  const double total = std::accumulate(d.begin(), d.end(), 0.0);
  if (total <= 0) return {};
  for (double& v : d) v /= total;
  return d;
}

// The distribution after a committed context (uniform past the image: a row nothing follows).
Dist After(const TableLaw& t, const std::vector<int64_t>& context) {
  if (static_cast<int64_t>(context.size()) >= t.tokens()) return Uniform(t.vocab());
  return t.Next(context);
}

void AddScaled(Law* into, const Law& from, double weight) {
  for (size_t i = 0; i < from.size(); ++i) (*into)[i] += weight * from[i];
}

// ---------------------------------------------------------------------------------------------
// Verification of a draft tree (a chain is the tree whose node i has parent i - 1): recursive
// rejection over siblings from the committed context, every random outcome enumerated.

struct Node {
  int64_t token = 0;
  int64_t parent = -1;  // -1: the committed context
  Dist q;               // what it was drawn from (one-hot for a deterministic draft)
  // GSD: the group rule judges this node (chain only).
  bool grouped = false;
  // A deterministic draft (EAGLE-2's dynamic tree): q is one-hot on the token.
  bool deterministic = false;
};

struct Outcome {
  std::vector<int64_t> path;  // kept nodes, root first
  int64_t next = -1;          // drawn after the path (-1: none, the image is complete)
  double probability = 0;
};

struct GroupRuleSpec {
  int64_t size = 1;
  double gap = 0, distance = 0;
};

// LANTERN's latent relaxation over the table model's codebook (token t at t on a line, so a
// token's neighbours are the others by distance, then by id).
struct RelaxationSpec {
  int kind = 0;  // 0 none, 1 additive (LANTERN: c_m <= delta), 2 multiplicative (LANTERN++)
  int64_t k = 0;
  double delta = 0, lambda = 1;

  std::vector<int64_t> Neighbours(int64_t x, int64_t vocab) const {
    std::vector<int64_t> others;
    for (int64_t y = 0; y < vocab; ++y) {
      if (y != x) others.push_back(y);
    }
    std::stable_sort(others.begin(), others.end(),
                     [&](int64_t a, int64_t b) { return std::abs(a - x) < std::abs(b - x); });
    return others;
  }
  // c_m: the mass of the longest prefix of x's first k neighbours within the bound.
  double Borrowed(const Dist& p, int64_t x) const {
    if (kind == 0) return 0;
    const std::vector<int64_t> n = Neighbours(x, static_cast<int64_t>(p.size()));
    const double bound = kind == 1 ? delta : p[x] * (lambda - 1);
    double sum = 0, borrowed = 0;
    for (int64_t i = 0; i < std::min<int64_t>(k, n.size()); ++i) {
      sum += p[n[i]];
      if (sum <= bound) borrowed = sum;
    }
    return borrowed;
  }
  // What a rejection after pooling takes out besides x: its first k + 1 neighbours.
  std::vector<int64_t> Neighbourhood(int64_t x, int64_t vocab) const {
    std::vector<int64_t> n = Neighbours(x, vocab);
    n.resize(std::min<int64_t>(k + 1, n.size()));
    return n;
  }
};

// G(x) under p: x, then the tokens within the rank window around x (ties by id), close in
// probability and in the table model's embedding (token t at t + 1 on one axis).
std::vector<int64_t> Group(const Dist& p, int64_t x, const GroupRuleSpec& g) {
  std::vector<int64_t> group = {x};
  if (g.size <= 1) return group;
  std::vector<int64_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  const int64_t vocab = static_cast<int64_t>(p.size());
  const int64_t rank = std::find(order.begin(), order.end(), x) - order.begin();
  const int64_t less = g.size / 2, more = g.size - 1 - less;
  for (int64_t r = std::max<int64_t>(0, rank - more); r <= std::min(vocab - 1, rank + less); ++r) {
    const int64_t y = order[r];
    if (y == x || std::abs(p[y] - p[x]) >= g.gap) continue;
    const double d = static_cast<double>(y - x);
    if (d * d < g.distance) group.push_back(y);
  }
  return group;
}

class TreeWalk {
 public:
  TreeWalk(const TableLaw& t, const std::vector<Node>& nodes, const BrokenRules& broken,
           const GroupRuleSpec& group, const RelaxationSpec& relaxation = {})
      : t_(t), nodes_(nodes), broken_(broken), group_(group), relaxation_(relaxation) {}

  // Outcomes of the walk from the committed `context` (the root).
  std::vector<Outcome> FromRoot(const std::vector<int64_t>& context) {
    std::vector<Outcome> out;
    Walk(-1, context, {}, 1.0, &out);
    return out;
  }

 private:
  std::vector<int64_t> Children(int64_t at) const {
    std::vector<int64_t> c;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].parent == at) c.push_back(static_cast<int64_t>(i));
    }
    return c;
  }

  double KeepProbability(const Dist& p, const Node& node) const {
    if (node.grouped) {
      double pg = 0, qg = 0;
      for (int64_t y : Group(p, node.token, group_)) {
        pg += p[y];
        qg += node.q[y];
      }
      return std::min(1.0, pg / qg);
    }
    const double borrowed = relaxation_.Borrowed(p, node.token);
    return std::min(1.0, (p[node.token] + borrowed) / node.q[node.token]);
  }

  // p' after `node` was rejected.
  Dist AfterRejection(const Dist& p, const Node& node) const {
    if (broken_.residual_from_p) return p;
    const int64_t vocab = static_cast<int64_t>(p.size());
    const bool pooled = relaxation_.Borrowed(p, node.token) > 0;
    if (node.deterministic) {  // x, and the neighbourhood when pooled, out; uniform if empty
      Dist rest = p;
      rest[node.token] = 0;
      if (pooled) {
        for (int64_t y : relaxation_.Neighbourhood(node.token, vocab)) rest[y] = 0;
      }
      const double total = std::accumulate(rest.begin(), rest.end(), 0.0);
      if (total <= 0) return Uniform(vocab);
      for (double& v : rest) v /= total;
      return rest;
    }
    Dist taken = node.q;  // the neighbourhood keeps its target mass
    if (pooled) {
      for (int64_t y : relaxation_.Neighbourhood(node.token, vocab)) taken[y] = 0;
    }
    return Residual(p, taken);
  }

  void Walk(int64_t at, const std::vector<int64_t>& context, const std::vector<int64_t>& path,
            double probability, std::vector<Outcome>* out) {
    Judge(Children(at), 0, After(t_, context), context, path, {}, probability, out);
  }

  // Judges children[k..] against p' with `kept` already accepted (keep_longest_path only).
  void Judge(const std::vector<int64_t>& children, size_t k, const Dist& p,
             const std::vector<int64_t>& context, const std::vector<int64_t>& path,
             const std::vector<int64_t>& kept, double probability, std::vector<Outcome>* out) {
    if (probability <= 0) return;
    if (k == children.size()) {
      if (kept.empty()) {
        Draw(p, context, path, probability, out);
      } else {
        Longest(kept, context, path, probability, out);
      }
      return;
    }
    const Node& node = nodes_[children[k]];
    const double keep = KeepProbability(p, node);
    if (keep > 0) {
      if (broken_.longest_path) {
        std::vector<int64_t> more = kept;
        more.push_back(children[k]);
        Judge(children, k + 1, p, context, path, more, probability * keep, out);
      } else {
        std::vector<int64_t> down = path, below = context;
        down.push_back(children[k]);
        below.push_back(node.token);
        Walk(children[k], below, down, probability * keep, out);
      }
    }
    if (keep < 1) {
      Judge(children, k + 1, AfterRejection(p, node), context, path, kept, probability * (1 - keep),
            out);
    }
  }

  // The token after the path, from p' (none past the image).
  void Draw(const Dist& p, const std::vector<int64_t>& context, const std::vector<int64_t>& path,
            double probability, std::vector<Outcome>* out) {
    if (static_cast<int64_t>(context.size()) >= t_.tokens()) {
      out->push_back({path, -1, probability});
      return;
    }
    for (size_t y = 0; y < p.size(); ++y) {
      if (p[y] > 0) out->push_back({path, static_cast<int64_t>(y), probability * p[y]});
    }
  }

  // Every kept child walks on; the one whose kept path is longest wins (the first on ties).
  void Longest(const std::vector<int64_t>& kept, const std::vector<int64_t>& context,
               const std::vector<int64_t>& path, double probability, std::vector<Outcome>* out) {
    std::vector<std::vector<Outcome>> below;
    for (int64_t child : kept) {
      std::vector<int64_t> down = path, deeper = context;
      down.push_back(child);
      deeper.push_back(nodes_[child].token);
      below.emplace_back();
      Walk(child, deeper, down, 1.0, &below.back());
    }
    std::vector<size_t> pick(kept.size(), 0);
    while (true) {
      double p = probability;
      const Outcome* best = nullptr;
      for (size_t i = 0; i < kept.size(); ++i) {
        const Outcome& o = below[i][pick[i]];
        p *= o.probability;
        if (best == nullptr || o.path.size() > best->path.size()) best = &o;
      }
      out->push_back({best->path, best->next, p});
      size_t i = 0;
      while (i < kept.size() && ++pick[i] == below[i].size()) pick[i++] = 0;
      if (i == kept.size()) break;
    }
  }

  const TableLaw& t_;
  const std::vector<Node>& nodes_;
  BrokenRules broken_;
  GroupRuleSpec group_;
  RelaxationSpec relaxation_;
};

// ---------------------------------------------------------------------------------------------
// The Jacobi family.

// A carried draft's q: a row of the target's table, or one-hot on a token.
struct QRef {
  int64_t row = -1;
  int64_t token = -1;
  bool operator<(const QRef& o) const { return std::tie(row, token) < std::tie(o.row, o.token); }
};

struct JacobiState {
  std::vector<int64_t> x;                   // committed
  std::vector<int64_t> w;                   // drafts at positions |x|, |x| + 1, ...
  std::vector<QRef> q;                      // what each was drawn from
  std::vector<std::vector<int64_t>> extra;  // SJD-PAC: level l's extra candidates, draw order
  std::vector<int64_t> extra_row;           // the table row they were drawn from (without w_l)

  std::string Key() const {
    std::string k;
    auto put = [&](int64_t v) { k += std::to_string(v) + ","; };
    for (int64_t v : x) put(v);
    k += "|";
    for (size_t i = 0; i < w.size(); ++i) {
      put(w[i]);
      put(q[i].row);
      put(q[i].token);
    }
    k += "|";
    for (size_t l = 0; l < extra.size(); ++l) {
      put(extra_row[l]);
      for (int64_t v : extra[l]) put(v);
      k += ";";
    }
    return k;
  }
};

class JacobiEnumeration {
 public:
  JacobiEnumeration(const TableLaw& t, const JacobiRule& rule) : t_(t), rule_(rule) {
    group_.size = rule.group_size;
    group_.gap = rule.max_probability_gap;
    group_.distance = rule.max_embedding_distance;
  }

  Law Run() {
    Law law(t_.images(), 0.0);
    const Dist first = t_.Next({});
    for (int64_t y = 0; y < t_.vocab(); ++y) {
      JacobiState s;
      s.x = {y};
      AddScaled(&law, From(s), first[y]);
    }
    return law;
  }

 private:
  Dist Q(const QRef& r) const {
    return r.row >= 0 ? t_.rows()[r.row] : OneHot(t_.vocab(), r.token);
  }

  const Law& From(const JacobiState& s) {
    const std::string key = s.Key();
    auto found = memo_.find(key);
    if (found != memo_.end()) return found->second;
    Law law(t_.images(), 0.0);
    if (static_cast<int64_t>(s.x.size()) == t_.tokens()) {
      law[t_.ImageIndex(s.x)] = 1.0;
    } else {
      Step(s, &law);
    }
    return memo_.emplace(key, std::move(law)).first->second;
  }

  // Fills the window (every initial token enumerated) and verifies each filling.
  void Step(const JacobiState& s, Law* law) {
    const int64_t n = static_cast<int64_t>(s.x.size());
    const int64_t length = std::min<int64_t>(rule_.window, t_.tokens() - n);
    JacobiState filled = s;
    filled.w.resize(std::min<int64_t>(s.w.size(), length));
    filled.q.resize(filled.w.size());
    filled.extra.resize(std::min<int64_t>(s.extra.size(), length));
    filled.extra_row.resize(filled.extra.size());
    Fill(filled, length, 1.0, law);
  }

  void Fill(JacobiState& s, int64_t length, double probability, Law* law) {
    const int64_t n = static_cast<int64_t>(s.x.size());
    const int64_t at = static_cast<int64_t>(s.w.size());
    if (at == length) {
      Verify(s, length, probability, law);
      return;
    }
    const int64_t position = n + at, grid = t_.grid();
    if (rule_.repeat_horizon && position >= grid) {
      const int64_t above = position - grid;
      const int64_t token = above < n ? s.x[above] : s.w[above - n];
      s.w.push_back(token);
      s.q.push_back({-1, token});
      Fill(s, length, probability, law);
      s.w.pop_back();
      s.q.pop_back();
      return;
    }
    for (int64_t token = 0; token < t_.vocab(); ++token) {
      s.w.push_back(token);
      s.q.push_back({-1, token});
      Fill(s, length, probability / static_cast<double>(t_.vocab()), law);
      s.w.pop_back();
      s.q.pop_back();
    }
  }

  // SJD-PAC's tree (BuildTree in sjd_pac.cc, by its rule): the first levels branch into the
  // carried draft and the extra candidates, under every node of the level above; past them
  // the carried drafts hang as a chain off the carried path.
  std::vector<Node> Tree(const JacobiState& s, int64_t length) const {
    std::vector<Node> nodes;
    const int64_t branching = std::min<int64_t>(s.extra.size(), length);
    std::vector<int64_t> previous = {-1};
    int64_t main = -1;
    for (int64_t l = 0; l < length; ++l) {
      const Dist ql = Q(s.q[l]);
      if (l >= branching) {
        nodes.push_back({s.w[l], main, ql, rule_.group_size > 1});
        main = static_cast<int64_t>(nodes.size()) - 1;
        continue;
      }
      std::vector<int64_t> level;
      int64_t next_main = -1;
      for (int64_t parent : previous) {
        nodes.push_back({s.w[l], parent, ql, false});
        level.push_back(static_cast<int64_t>(nodes.size()) - 1);
        if (parent == main) next_main = level.back();
        std::vector<int64_t> removed = {s.w[l]};
        for (int64_t e : s.extra[l]) {
          const Dist base = t_.rows()[s.extra_row[l]];
          nodes.push_back({e, parent,
                           rule_.broken.siblings_without_removal ? base : Without(base, removed),
                           false});
          level.push_back(static_cast<int64_t>(nodes.size()) - 1);
          removed.push_back(e);
        }
      }
      main = next_main;
      previous = std::move(level);
    }
    return nodes;
  }

  void Verify(const JacobiState& s, int64_t length, double probability, Law* law) {
    const std::vector<Node> nodes = Tree(s, length);
    TreeWalk walk(t_, nodes, rule_.broken, group_);
    for (const Outcome& o : walk.FromRoot(s.x)) {
      std::vector<int64_t> x = s.x;
      for (int64_t node : o.path) x.push_back(nodes[node].token);
      if (o.next >= 0 && static_cast<int64_t>(x.size()) < t_.tokens()) x.push_back(o.next);
      Continue(s, length, std::move(x), probability * o.probability, law);
    }
  }

  // The Jacobi update along the carried path: rows [first, length + bonus) of this
  // iteration's p, each re-drawn (SJD) or coupled with its carried draft (MC-SJD); SJD-PAC's
  // next extra candidates drawn without replacement after them.
  void Continue(const JacobiState& s, int64_t length, std::vector<int64_t> x, double probability,
                Law* law) {
    const int64_t n = static_cast<int64_t>(s.x.size());
    const bool bonus = n + length < t_.tokens();
    const int64_t rows_total = length + (bonus ? 1 : 0);
    const int64_t first = static_cast<int64_t>(x.size()) - n;
    JacobiState next;
    next.x = std::move(x);
    if (rows_total - first <= 0) {
      AddScaled(law, From(next), probability);
      return;
    }
    // Row i's context: the committed prefix and the carried drafts before it.
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < rows_total; ++i) {
      std::vector<int64_t> context = s.x;
      context.insert(context.end(), s.w.begin(), s.w.begin() + i);
      rows.push_back(t_.RowOf(context));
    }
    Redraw(s, length, rows, first, first, next, probability, law);
  }

  void Redraw(const JacobiState& s, int64_t length, const std::vector<int64_t>& rows, int64_t first,
              int64_t i, JacobiState& next, double probability, Law* law) {
    if (probability <= 0) return;
    if (i == static_cast<int64_t>(rows.size())) {
      Extras(length, rows, first, 0, next, probability, law);
      return;
    }
    const Dist& p = t_.rows()[rows[i]];
    Dist draw = p;
    double keep = 0;
    const bool carried = i < length;
    if (carried && rule_.coupling) {
      const Dist q = Q(s.q[i]);
      keep = std::min(1.0, p[s.w[i]] / q[s.w[i]]);
      draw = rule_.broken.coupled_residual_from_p ? p : Residual(p, q);
    }
    for (int64_t y = 0; y < t_.vocab(); ++y) {
      const double py =
          (1 - keep) * draw[y] + (carried && rule_.coupling && y == s.w[i] ? keep : 0.0);
      if (py <= 0) continue;
      next.w.push_back(y);
      const bool kept = carried && y == s.w[i];
      next.q.push_back(rule_.broken.old_q_for_kept && rule_.coupling && kept ? s.q[i]
                                                                             : QRef{rows[i], -1});
      Redraw(s, length, rows, first, i + 1, next, probability * py, law);
      next.w.pop_back();
      next.q.pop_back();
    }
  }

  // SJD-PAC: width - 1 candidates for each of the next window's first depth - 1 positions,
  // drawn without replacement from the row its draft came from, after the draft.
  void Extras(int64_t length, const std::vector<int64_t>& rows, int64_t first, int64_t level,
              JacobiState& next, double probability, Law* law) {
    const int64_t redrawn = static_cast<int64_t>(rows.size()) - first;
    const int64_t levels = rule_.width > 1 ? std::min<int64_t>(rule_.depth - 1, redrawn) : 0;
    if (level == levels) {
      AddScaled(law, From(next), probability);
      return;
    }
    const int64_t row = rows[first + level];
    next.extra_row.push_back(row);
    next.extra.emplace_back();
    Sibling(length, rows, first, level, {next.w[level]}, next, probability, law);
    next.extra.pop_back();
    next.extra_row.pop_back();
  }

  void Sibling(int64_t length, const std::vector<int64_t>& rows, int64_t first, int64_t level,
               std::vector<int64_t> removed, JacobiState& next, double probability, Law* law) {
    const Dist rest = Without(t_.rows()[rows[first + level]], removed);
    if (static_cast<int64_t>(next.extra[level].size()) == rule_.width - 1 || rest.empty()) {
      Extras(length, rows, first, level + 1, next, probability, law);
      return;
    }
    for (int64_t y = 0; y < t_.vocab(); ++y) {
      if (rest[y] <= 0) continue;
      next.extra[level].push_back(y);
      removed.push_back(y);
      Sibling(length, rows, first, level, removed, next, probability * rest[y], law);
      removed.pop_back();
      next.extra[level].pop_back();
    }
  }

  const TableLaw& t_;
  JacobiRule rule_;
  GroupRuleSpec group_;
  std::map<std::string, Law> memo_;
};

// ---------------------------------------------------------------------------------------------
// Speculative decoding.

class SpeculativeEnumeration {
 public:
  SpeculativeEnumeration(const TableLaw& t, const TableLaw& q, int64_t gamma,
                         const BrokenRules& broken)
      : t_(t), q_(q), gamma_(gamma), broken_(broken) {}

  Law Run() {
    Law law(t_.images(), 0.0);
    const Dist first = t_.Next({});
    for (int64_t y = 0; y < t_.vocab(); ++y) AddScaled(&law, From({y}), first[y]);
    return law;
  }

 private:
  const Law& From(const std::vector<int64_t>& x) {
    const int64_t key = t_.ImageIndex(x) * (t_.tokens() + 1) + static_cast<int64_t>(x.size());
    auto found = memo_.find(key);
    if (found != memo_.end()) return found->second;
    Law law(t_.images(), 0.0);
    if (static_cast<int64_t>(x.size()) == t_.tokens()) {
      law[t_.ImageIndex(x)] = 1.0;
    } else {
      const int64_t gamma = std::min<int64_t>(gamma_, t_.tokens() - static_cast<int64_t>(x.size()));
      std::vector<Node> chain;
      Drafts(x, gamma, &chain, 1.0, &law);
    }
    return memo_.emplace(key, std::move(law)).first->second;
  }

  // Every draft chain of `gamma` tokens from q, then its verification.
  void Drafts(const std::vector<int64_t>& x, int64_t gamma, std::vector<Node>* chain,
              double probability, Law* law) {
    if (static_cast<int64_t>(chain->size()) == gamma) {
      TreeWalk walk(t_, *chain, broken_, {});
      for (const Outcome& o : walk.FromRoot(x)) {
        std::vector<int64_t> next = x;
        for (int64_t node : o.path) next.push_back((*chain)[node].token);
        if (o.next >= 0 && static_cast<int64_t>(next.size()) < t_.tokens()) next.push_back(o.next);
        AddScaled(law, From(next), probability * o.probability);
      }
      return;
    }
    std::vector<int64_t> context = x;
    for (const Node& node : *chain) context.push_back(node.token);
    const Dist q = q_.Next(context);
    for (int64_t y = 0; y < q_.vocab(); ++y) {
      chain->push_back({y, static_cast<int64_t>(chain->size()) - 1, q, false});
      Drafts(x, gamma, chain, probability * q[y], law);
      chain->pop_back();
    }
  }

  const TableLaw& t_;
  const TableLaw& q_;
  int64_t gamma_;
  BrokenRules broken_;
  std::map<int64_t, Law> memo_;
};

// ---------------------------------------------------------------------------------------------
// EAGLE's trees (and LANTERN's relaxation of their verification).

class TreeEnumeration {
 public:
  TreeEnumeration(const TableLaw& t, const TableLaw& head, const TreeRule& rule)
      : t_(t), head_(head), rule_(rule) {
    relaxation_.kind = rule.relaxation;
    relaxation_.k = rule.k;
    relaxation_.delta = rule.delta;
    relaxation_.lambda = rule.lambda;
  }

  Law Run() {
    Law law(t_.images(), 0.0);
    const Dist first = t_.Next({});
    for (int64_t y = 0; y < t_.vocab(); ++y) AddScaled(&law, From({y}), first[y]);
    return law;
  }

 private:
  const Law& From(const std::vector<int64_t>& x) {
    const int64_t key = t_.ImageIndex(x) * (t_.tokens() + 1) + static_cast<int64_t>(x.size());
    auto found = memo_.find(key);
    if (found != memo_.end()) return found->second;
    Law law(t_.images(), 0.0);
    const int64_t n = static_cast<int64_t>(x.size());
    if (n == t_.tokens()) {
      law[t_.ImageIndex(x)] = 1.0;
    } else {
      const int64_t max_depth = t_.tokens() - n - 1;  // nodes stop before the last position
      if (max_depth <= 0) {
        Verify(x, {}, 1.0, &law);
      } else if (rule_.static_tree) {
        std::vector<Node> nodes;
        const std::vector<int64_t> shape = StaticShape(max_depth);
        std::vector<int64_t> placed(shape.size(), -1);
        DrawStatic(x, shape, 0, &nodes, &placed, 1.0, &law);
      } else {
        Verify(x, DynamicTree(x, max_depth), 1.0, &law);
      }
    }
    return memo_.emplace(key, std::move(law)).first->second;
  }

  void Verify(const std::vector<int64_t>& x, const std::vector<Node>& nodes, double probability,
              Law* law) {
    TreeWalk walk(t_, nodes, rule_.broken, {}, relaxation_);
    for (const Outcome& o : walk.FromRoot(x)) {
      std::vector<int64_t> next = x;
      for (int64_t node : o.path) next.push_back(nodes[node].token);
      if (o.next >= 0 && static_cast<int64_t>(next.size()) < t_.tokens()) next.push_back(o.next);
      AddScaled(law, From(next), probability * o.probability);
    }
  }

  std::vector<int64_t> Context(const std::vector<int64_t>& x, const std::vector<Node>& nodes,
                               int64_t node) const {
    std::vector<int64_t> path;
    for (int64_t at = node; at >= 0; at = nodes[at].parent) path.push_back(nodes[at].token);
    std::vector<int64_t> context = x;
    context.insert(context.end(), path.rbegin(), path.rend());
    return context;
  }

  // StaticTree57's parents, cut at max_depth.
  static std::vector<int64_t> StaticShape(int64_t max_depth) {
    return StaticTree57Cut(max_depth).parents;
  }

  // Draws the children of every shape node in order (parents first), each node's children
  // without replacement from the head's q after it; a child past the tokens with mass is
  // dropped with its subtree.
  // `at` walks the shape's parents: -1 (the root), then every node in order; `placed` maps a
  // shape node to its drawn node (-1: dropped).
  void DrawStatic(const std::vector<int64_t>& x, const std::vector<int64_t>& shape, size_t at,
                  std::vector<Node>* nodes, std::vector<int64_t>* placed, double probability,
                  Law* law) {
    if (at == shape.size() + 1) {
      Verify(x, *nodes, probability, law);
      return;
    }
    const int64_t parent = static_cast<int64_t>(at) - 1;
    std::vector<int64_t> children;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == parent) children.push_back(static_cast<int64_t>(i));
    }
    // The shape parent's node (its draw may have been dropped).
    const int64_t node = parent < 0 ? -1 : (*placed)[parent];
    if (children.empty() || (parent >= 0 && node < 0)) {
      for (int64_t c : children) (*placed)[c] = -1;
      DrawStatic(x, shape, at + 1, nodes, placed, probability, law);
      return;
    }
    const Dist q = head_.Next(Context(x, *nodes, node));
    DrawSiblings(x, shape, at, children, 0, q, {}, nodes, placed, node, probability, law);
  }

  void DrawSiblings(const std::vector<int64_t>& x, const std::vector<int64_t>& shape, size_t at,
                    const std::vector<int64_t>& children, size_t c, const Dist& q,
                    std::vector<int64_t> removed, std::vector<Node>* nodes,
                    std::vector<int64_t>* placed, int64_t parent, double probability, Law* law) {
    const Dist rest = c < children.size() ? Without(q, removed) : Dist();
    if (rest.empty()) {
      for (size_t i = c; i < children.size(); ++i) (*placed)[children[i]] = -1;
      DrawStatic(x, shape, at + 1, nodes, placed, probability, law);
      return;
    }
    for (int64_t y = 0; y < t_.vocab(); ++y) {
      if (rest[y] <= 0) continue;
      nodes->push_back({y, parent, rest, false, false});
      (*placed)[children[c]] = static_cast<int64_t>(nodes->size()) - 1;
      removed.push_back(y);
      DrawSiblings(x, shape, at, children, c + 1, q, removed, nodes, placed, parent,
                   probability * rest[y], law);
      removed.pop_back();
      nodes->pop_back();
    }
  }

  // EAGLE-2's tree after x: the dynamic tree builder over the head's log-probabilities (in
  // float32, as the head's forward gives them), expanded to depth min(depth, max_depth - 1).
  std::vector<Node> DynamicTree(const std::vector<int64_t>& x, int64_t max_depth) const {
    DynamicTreeOptions options{rule_.total_tokens, std::min(rule_.depth, max_depth - 1),
                               rule_.top_k};
    auto log_row = [&](const std::vector<int64_t>& context) {
      const Dist q = head_.Next(context);
      std::vector<float> row(q.begin(), q.end());
      return torch::tensor(row).log();
    };
    DynamicTreeBuilder builder(options);
    builder.Start(log_row(x));
    auto context_of = [&](int64_t recorded) {
      std::vector<int64_t> path;
      for (int64_t at = recorded; at >= 0; at = builder.parents()[at]) {
        path.push_back(builder.tokens()[at]);
      }
      std::vector<int64_t> context = x;
      context.insert(context.end(), path.rbegin(), path.rend());
      return context;
    };
    while (builder.expansions_left() > 0) {
      std::vector<torch::Tensor> rows;
      for (int64_t f : builder.frontier()) rows.push_back(log_row(context_of(f)));
      if (rows.empty()) break;
      builder.Expand(torch::stack(rows));
    }
    const DynamicTreeBuilder::Chosen chosen = builder.Finish();
    std::vector<Node> nodes;
    for (size_t i = 0; i < chosen.tokens.size(); ++i) {
      nodes.push_back({chosen.tokens[i], chosen.shape.parents[i],
                       OneHot(t_.vocab(), chosen.tokens[i]), false, true});
    }
    return nodes;
  }

  const TableLaw& t_;
  const TableLaw& head_;
  TreeRule rule_;
  RelaxationSpec relaxation_;
  std::map<int64_t, Law> memo_;
};

// ---------------------------------------------------------------------------------------------
// ZipAR.

std::vector<Seen> ZipArSightOf(int64_t grid, int64_t window, int64_t target,
                               const std::vector<int64_t>& image);

// The pairs the forward predicting raster token `target` sees, by the wavefront's rule, and
// the image decoded so far.
std::vector<Seen> ZipArSight(int64_t grid, int64_t window, int64_t target,
                             const std::vector<int64_t>& image,
                             const std::function<bool(int64_t, int64_t)>& visible) {
  std::vector<Seen> seen = ZipArSightOf(grid, window, target, image);
  if (!visible) return seen;
  // The row whose output predicts `target`: the placeholder, or the token before it.
  const int64_t r = target / grid, c = target % grid;
  const int64_t fed = r >= 2 && c == 0 && window < grid ? (r - 1) * grid + grid - 1 : target - 1;
  std::vector<Seen> kept;
  for (const Seen& s : seen) {
    if (s.first == fed || visible(fed, s.first)) kept.push_back(s);
  }
  return kept;
}

std::vector<Seen> ZipArSightOf(int64_t grid, int64_t window, int64_t target,
                               const std::vector<int64_t>& image) {
  const int64_t r = target / grid, c = target % grid;
  std::vector<Seen> seen;
  auto whole_row = [&](int64_t row, int64_t count) {
    for (int64_t j = 0; j < count; ++j) seen.push_back({row * grid + j, image[row * grid + j]});
  };
  const bool placeholder = r >= 2 && c == 0 && window < grid;
  if (r == 0 || (c == 0 && !placeholder)) {  // plain AR: everything before
    for (int64_t j = 0; j < target; ++j) seen.push_back({j, image[j]});
    return seen;
  }
  if (placeholder) {
    // Fed at (r - 1, grid - 1) beside row r - 1's window-th token: it sees what that token
    // sees, that token, and itself carrying row r - 2's newest token.
    whole_row(0, grid);
    for (int64_t row = 1; row < r - 1; ++row) {
      whole_row(row, std::min(grid, (r - row) * window));
    }
    whole_row(r - 1, window);
    const int64_t newest = r - 2 == 0 ? grid : std::min(grid, 2 * window);
    seen.push_back({(r - 1) * grid + grid - 1, image[(r - 2) * grid + newest - 1]});
    std::sort(seen.begin(), seen.end());
    return seen;
  }
  // Predicted by the token fed at (r, c - 1).
  whole_row(0, grid);
  for (int64_t k = 1; r - k >= 1; ++k) whole_row(r - k, std::min(grid, k * window + c));
  for (int64_t j = 0; j < c; ++j) seen.push_back({r * grid + j, image[r * grid + j]});
  std::sort(seen.begin(), seen.end());
  return seen;
}

}  // namespace

Law JacobiLaw(const TableLaw& t, const JacobiRule& rule) {
  return JacobiEnumeration(t, rule).Run();
}

Law SpeculativeLaw(const TableLaw& t, const TableLaw& q, int64_t gamma, const BrokenRules& broken) {
  return SpeculativeEnumeration(t, q, gamma, broken).Run();
}

Law MuloLaw(const TableLaw& t, const std::vector<double>& drafter,
            const std::vector<std::vector<int64_t>>& upsampled, const MuloRule& rule) {
  const int64_t n = t.tokens(), grid = t.grid(), vocab = t.vocab();
  RelaxationSpec pooling;
  pooling.kind = 1;
  pooling.k = rule.k;
  pooling.delta = rule.delta;
  Law law(t.images(), 0.0);
  for (size_t d = 0; d < drafter.size(); ++d) {
    const std::vector<int64_t>& drafts = upsampled[d];
    // Verify: p_i after the drafts before i; kept when pooled >= tau.
    std::vector<Dist> verify;
    std::vector<int64_t> rejected;
    for (int64_t i = 0; i < n; ++i) {
      verify.push_back(t.Next(std::vector<int64_t>(drafts.begin(), drafts.begin() + i)));
      const double pooled = verify[i][drafts[i]] + pooling.Borrowed(verify[i], drafts[i]);
      if (pooled < rule.tau) rejected.push_back(i);
    }
    std::vector<bool> resample(n, false);
    if (!rejected.empty()) {
      const int64_t t0 = rejected.front();
      for (int64_t u = t0; u < n; ++u) {
        if (rule.raster_rejection) {
          resample[u] = true;
          continue;
        }
        for (int64_t r : rejected) {
          if (std::abs(u / grid - r / grid) <= rule.radius &&
              std::abs(u % grid - r % grid) <= rule.radius) {
            resample[u] = true;
          }
        }
      }
    }
    // Every image the re-sampled positions can take, in raster order.
    std::vector<std::pair<std::vector<int64_t>, double>> images = {{drafts, drafter[d]}};
    std::vector<int64_t> drawn;
    for (int64_t u = 0; u < n; ++u) {
      if (!resample[u]) continue;
      bool from_verify = drawn.empty();
      if (!from_verify && rule.parallel) {
        from_verify = true;
        for (int64_t v : drawn) {
          if (std::abs(u / grid - v / grid) <= rule.parallel_radius &&
              std::abs(u % grid - v % grid) <= rule.parallel_radius) {
            from_verify = false;
          }
        }
      }
      std::vector<std::pair<std::vector<int64_t>, double>> next;
      for (const auto& [image, probability] : images) {
        const Dist p = from_verify ? verify[u]
                                   : t.Next(std::vector<int64_t>(image.begin(), image.begin() + u));
        for (int64_t y = 0; y < vocab; ++y) {
          std::vector<int64_t> with = image;
          with[u] = y;
          next.push_back({with, probability * p[y]});
        }
      }
      images = std::move(next);
      drawn.push_back(u);
    }
    for (const auto& [image, probability] : images) law[t.ImageIndex(image)] += probability;
  }
  return law;
}

Law EagleLaw(const TableLaw& t, const TableLaw& head, const TreeRule& rule) {
  return TreeEnumeration(t, head, rule).Run();
}

Law ZipArLaw(const TableLaw& t, int64_t window,
             const std::function<bool(int64_t own, int64_t seen)>& visible) {
  Law law(t.images(), 0.0);
  for (int64_t i = 0; i < t.images(); ++i) {
    const std::vector<int64_t> image = t.ImageAt(i);
    double p = 1;
    for (int64_t j = 0; j < t.tokens() && p > 0; ++j) {
      p *= t.Given(j, ZipArSight(t.grid(), window, j, image, visible))[image[j]];
    }
    law[i] = p;
  }
  return law;
}

double Noncentrality(const Law& broken, const Law& exact) {
  double d = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    if (exact[i] > 0) d += (broken[i] - exact[i]) * (broken[i] - exact[i]) / exact[i];
  }
  return d;
}

double TotalVariation(const Law& a, const Law& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += std::abs(a[i] - b[i]);
  return d / 2;
}

PooledNoncentrality PooledAt(const Law& broken, const Law& exact, int64_t runs) {
  PooledNoncentrality out;
  const double n = static_cast<double>(runs);
  double pooled_b = 0, pooled_e = 0;
  int cells = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    if (exact[i] * n < 5) {
      pooled_b += broken[i];
      pooled_e += exact[i];
      continue;
    }
    out.lambda += n * (broken[i] - exact[i]) * (broken[i] - exact[i]) / exact[i];
    ++cells;
  }
  if (pooled_e > 0) {
    out.lambda += n * (pooled_b - pooled_e) * (pooled_b - pooled_e) / pooled_e;
    ++cells;
  }
  out.df = std::max(1, cells - 1);
  return out;
}

Power RunsForPower(const Law& broken, const Law& exact, double power, int64_t max_runs) {
  auto at = [&](int64_t runs) {
    const PooledNoncentrality pn = PooledAt(broken, exact, runs);
    Power p;
    p.runs = runs;
    p.df = pn.df;
    p.lambda = pn.lambda;
    p.critical = ChiSquareCritical999(pn.df);
    p.probability = ExceedProbability(pn.df, pn.lambda, p.critical);
    return p;
  };
  for (int64_t runs = 100; runs <= max_runs; runs += 100) {
    const Power p = at(runs);
    if (p.probability >= power) return p;
  }
  Power none = at(max_runs);
  none.runs = max_runs + 1;
  return none;
}

double ChiSquareCritical999(int df) {
  const double z = 3.090232;  // the standard normal's 99.9% quantile
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

double ExceedProbability(int df, double lambda, double critical) {
  // Patnaik: X ~ c chi2(nu); then Wilson-Hilferty for chi2(nu).
  const double k = static_cast<double>(df);
  const double c = (k + 2 * lambda) / (k + lambda);
  const double nu = (k + lambda) * (k + lambda) / (k + 2 * lambda);
  const double x = critical / c;
  const double a = 2.0 / (9.0 * nu);
  const double z = (std::cbrt(x / nu) - (1 - a)) / std::sqrt(a);
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

}  // namespace mulo::engine::testing
