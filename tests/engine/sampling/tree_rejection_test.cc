// The device tree verifiers (JudgeTree; JudgeRelaxedTree, LANTERN's and LANTERN++'s) make the
// host walk's decisions (TreeVerifier::Verify, the oracle) given the same random streams, count
// what it counts, leave the streams where the host walk leaves them, and dispatch a bounded
// number of operators (all of which a graph could hold: none reads the host).
#include "engine/sampling/tree_rejection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "engine/core/op_count.h"
#include "engine/sampling/latent_neighbors.h"
#include "engine/sampling/philox.h"
#include "engine/sampling/relaxed_tree_rejection.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/tree_verifier.h"
#include "engine/sampling/without_replacement.h"

namespace mulo::engine {
namespace {

constexpr int64_t kVocab = 20;

struct Tree {
  std::vector<int64_t> tokens, parents;
  int64_t depth = 0;
  torch::Tensor p_host;    // [L + 1, V]: row j < L after draft j, row L after the root
  torch::Tensor p_device;  // the same rows, the root's first
};

// A random tree shape with at most `max_children` children per node (parents before
// children), from the torch generator.
struct RandomShape {
  std::vector<int64_t> parents;
  std::vector<std::vector<int64_t>> children;  // per row: the drafts under it (index L: root)
  int64_t depth = 0;
};

RandomShape MakeRandomShape(int64_t size, int64_t max_children) {
  RandomShape shape;
  shape.children.resize(size + 1);
  std::vector<int64_t> depth_of;
  for (int64_t i = 0; i < size; ++i) {
    // Any earlier node (or the root) with room for another child.
    std::vector<int64_t> open;
    if (static_cast<int64_t>(shape.children[size].size()) < max_children) open.push_back(-1);
    for (int64_t j = 0; j < i; ++j) {
      if (static_cast<int64_t>(shape.children[j].size()) < max_children) open.push_back(j);
    }
    const int64_t parent = open[torch::randint(open.size(), {1}).item<int64_t>()];
    shape.children[parent < 0 ? size : parent].push_back(i);
    shape.parents.push_back(parent);
    depth_of.push_back(parent < 0 ? 1 : depth_of[parent] + 1);
    shape.depth = std::max(shape.depth, depth_of.back());
  }
  return shape;
}

// A random deterministic tree (siblings are distinct tokens, parents before children) whose
// p leans towards the drafted children by `closeness`, so that paths are kept for a while.
Tree RandomTree(int64_t size, int64_t max_children, double closeness, bool greedy, int64_t seed) {
  at::manual_seed(seed);
  const RandomShape shape = MakeRandomShape(size, max_children);
  Tree t;
  t.parents = shape.parents;
  t.depth = shape.depth;
  t.tokens.assign(size, 0);
  std::vector<std::vector<int64_t>> children(size + 1);  // per row: its children's tokens
  for (int64_t r = 0; r <= size; ++r) {
    for (int64_t child : shape.children[r]) {
      int64_t token;
      do {
        token = torch::randint(kVocab, {1}).item<int64_t>();
      } while (std::find(children[r].begin(), children[r].end(), token) != children[r].end());
      children[r].push_back(token);
      t.tokens[child] = token;
    }
  }
  // Row r (the root: size) puts extra mass on its children's tokens.
  torch::Tensor p = torch::softmax(torch::randn({size + 1, kVocab}) * 2.0, 1);
  for (int64_t r = 0; r <= size; ++r) {
    torch::Tensor lean = torch::zeros({kVocab});
    for (int64_t token : children[r]) lean[token] = torch::rand({1}).item<float>();
    if (lean.sum().item<double>() > 0) {
      p[r] = (1.0 - closeness) * p[r] + closeness * lean / lean.sum();
    }
  }
  if (greedy) p = torch::one_hot(p.argmax(1), kVocab).to(torch::kFloat32);
  t.p_host = p.to(torch::kFloat32);
  t.p_device = torch::cat({t.p_host.narrow(0, size, 1), t.p_host.narrow(0, 0, size)});
  return t;
}

TEST(TreeRejectionTest, TheDeviceWalkMakesTheHostWalksDecisions) {
  const TreeVerifier verifier;
  int kept_somewhere = 0, rejected_somewhere = 0, trials = 0;
  for (int64_t size : {0, 1, 4, 12, 30}) {
    for (int64_t max_children : {1, 3, 6}) {
      for (bool greedy : {false, true}) {
        for (int64_t seed = 0; seed < 12; ++seed) {
          const Tree t = RandomTree(size, max_children, (seed % 4) / 3.0, greedy,
                                    1000 * size + 100 * max_children + seed);
          const std::string where = "size " + std::to_string(size) + ", children " +
                                    std::to_string(max_children) + ", greedy " +
                                    std::to_string(greedy) + ", seed " + std::to_string(seed);
          Rng host_accept(seed, RngStream::kAcceptance), host_draw(seed, RngStream::kTarget);
          Rng device_accept(seed, RngStream::kAcceptance), device_draw(seed, RngStream::kTarget);
          for (int64_t i = 0; i < seed % 5; ++i) {  // mid-stream, as in a running request
            host_accept.Uniform();
            device_accept.Uniform();
            host_draw.Uniform();
            device_draw.Uniform();
          }
          const DraftBatch drafts{t.tokens, t.parents, torch::Tensor()};
          auto host = verifier.Verify({drafts, t.p_host, greedy}, {&host_accept, &host_draw});
          ASSERT_TRUE(host.ok()) << host.status().ToString();
          // A depth bound past the tree's own changes nothing.
          const int64_t bound = t.depth + seed % 2;
          TreeCall call{t.p_device,
                        torch::tensor(t.tokens, torch::kInt64),
                        torch::tensor(t.parents, torch::kInt64),
                        StreamUniforms(device_accept, size, torch::kCPU),
                        StreamUniforms(device_draw, 1, torch::kCPU),
                        greedy,
                        bound};
          const torch::Tensor judged = JudgeTree(call);
          ASSERT_EQ(judged.size(0), 3 + bound) << where;
          std::vector<int64_t> values(judged.data_ptr<int64_t>(),
                                      judged.data_ptr<int64_t>() + judged.numel());
          auto device = TreeDecisionFromHost(values, size, bound);
          ASSERT_TRUE(device.ok()) << device.status().ToString();
          EXPECT_EQ(device->accepted, host->accepted) << where;
          EXPECT_EQ(device->next_token, host->next_token) << where;
          // The streams end where the host walk left them.
          device_accept.Skip(static_cast<uint64_t>(device->tries));
          if (!greedy) device_draw.Skip(1);
          EXPECT_EQ(device_accept.Uniform(), host_accept.Uniform()) << where;
          EXPECT_EQ(device_draw.Uniform(), host_draw.Uniform()) << where;
          if (size > 0) {
            kept_somewhere += !host->accepted.empty();
            rejected_somewhere += host->accepted.size() < static_cast<size_t>(t.depth);
          }
          ++trials;
        }
      }
    }
  }
  // The cases exercise both outcomes.
  EXPECT_GT(kept_somewhere, trials / 5);
  EXPECT_GT(rejected_somewhere, trials / 5);
}

// A random static tree (EAGLE-1's kind): each node's children drawn without replacement from
// a q of its own; with `sparse`, some q have mass on two tokens only, so a third child's draw
// finds none and is dropped with its subtree (valid false).
struct StaticTree {
  std::vector<int64_t> tokens, parents;
  std::vector<bool> valid;
  int64_t depth = 0, widest = 0;
  torch::Tensor q;         // [L, V]: what each draft was drawn from
  torch::Tensor p_device;  // [L + 1, V], the root's row first
};

StaticTree RandomStaticTree(int64_t size, int64_t max_children, double closeness, bool greedy,
                            bool sparse, int64_t seed) {
  at::manual_seed(seed);
  Rng draws(seed, RngStream::kDrafter);
  StaticTree t;
  const RandomShape shape = MakeRandomShape(size, max_children);
  const std::vector<std::vector<int64_t>>& children = shape.children;
  t.parents = shape.parents;
  t.depth = shape.depth;
  t.tokens.assign(size, 0);
  t.valid.assign(size, true);
  t.q = torch::zeros({size, kVocab});
  torch::Tensor p = torch::softmax(torch::randn({size + 1, kVocab}) * 2.0, 1);
  for (int64_t r = 0; r <= size; ++r) {
    const std::vector<int64_t>& kids = children[r];
    t.widest = std::max<int64_t>(t.widest, kids.size());
    torch::Tensor q = torch::softmax(torch::randn({kVocab}) * 2.0, 0);
    if (sparse && r % 3 == 0) {  // mass on two tokens only
      torch::Tensor two = torch::zeros({kVocab});
      two.narrow(0, 0, 2).copy_(q.narrow(0, 0, 2));
      q = two / two.sum();
    }
    p[r] = (1.0 - closeness) * p[r] + closeness * q;
    if (kids.empty()) continue;
    const SiblingDraws drawn = DrawWithoutReplacement(q, kids.size(), draws, greedy);
    for (size_t k = 0; k < kids.size(); ++k) {
      if (k < drawn.tokens.size()) {
        t.tokens[kids[k]] = drawn.tokens[k];
        t.q[kids[k]] = drawn.q[k];
      } else {
        t.valid[kids[k]] = false;
      }
    }
  }
  if (greedy) p = torch::one_hot(p.argmax(1), kVocab).to(torch::kFloat32);
  const torch::Tensor host_rows = p.to(torch::kFloat32);
  t.p_device = torch::cat({host_rows.narrow(0, size, 1), host_rows.narrow(0, 0, size)});
  return t;
}

TEST(TreeRejectionTest, TheDeviceWalkMakesTheHostWalksDecisionsOnStaticTrees) {
  const TreeVerifier verifier;
  int kept_somewhere = 0, rejected_somewhere = 0, dropped = 0, trials = 0;
  for (int64_t size : {1, 4, 12, 30}) {
    for (int64_t max_children : {1, 3, 5}) {
      for (bool greedy : {false, true}) {
        for (int64_t seed = 0; seed < 10; ++seed) {
          const StaticTree t = RandomStaticTree(size, max_children, (seed % 4) / 3.0, greedy,
                                                seed % 2 == 1, 5000 + 100 * size + seed);
          const std::string where = "size " + std::to_string(size) + ", children " +
                                    std::to_string(max_children) + ", greedy " +
                                    std::to_string(greedy) + ", seed " + std::to_string(seed);
          // The host verifies the tree without the dropped drafts, as EagleProposer gives it.
          std::vector<int64_t> kept_index(size, -1), kept_nodes;
          DraftBatch drafts;
          for (int64_t i = 0; i < size; ++i) {
            const int64_t parent = t.parents[i];
            if (!t.valid[i] || (parent >= 0 && kept_index[parent] < 0)) continue;
            kept_index[i] = static_cast<int64_t>(kept_nodes.size());
            kept_nodes.push_back(i);
            drafts.tokens.push_back(t.tokens[i]);
            drafts.parents.push_back(parent < 0 ? -1 : kept_index[parent]);
          }
          dropped += size - static_cast<int64_t>(kept_nodes.size());
          const torch::Tensor nodes = torch::tensor(kept_nodes, torch::kInt64);
          drafts.q = t.q.index_select(0, nodes);
          // Row j after kept draft j, the root's last.
          const torch::Tensor p_host =
              torch::cat({t.p_device.index_select(0, nodes + 1), t.p_device.narrow(0, 0, 1)});
          Rng host_accept(seed, RngStream::kAcceptance), host_draw(seed, RngStream::kTarget);
          Rng device_accept(seed, RngStream::kAcceptance), device_draw(seed, RngStream::kTarget);
          auto host = verifier.Verify({drafts, p_host, greedy}, {&host_accept, &host_draw});
          ASSERT_TRUE(host.ok()) << host.status().ToString();
          std::vector<int64_t> host_path;
          for (int64_t j : host->accepted) host_path.push_back(kept_nodes[j]);
          std::vector<uint8_t> valid(t.valid.begin(), t.valid.end());
          TreeCall call{t.p_device,
                        torch::tensor(t.tokens, torch::kInt64),
                        torch::tensor(t.parents, torch::kInt64),
                        StreamUniforms(device_accept, size, torch::kCPU),
                        StreamUniforms(device_draw, 1, torch::kCPU),
                        greedy,
                        t.depth};
          call.q = t.q;
          call.valid = torch::tensor(valid, torch::kUInt8).to(torch::kBool);
          call.max_children = std::max<int64_t>(1, t.widest);
          const torch::Tensor judged = JudgeTree(call);
          std::vector<int64_t> values(judged.data_ptr<int64_t>(),
                                      judged.data_ptr<int64_t>() + judged.numel());
          auto device = TreeDecisionFromHost(values, size, t.depth);
          ASSERT_TRUE(device.ok()) << device.status().ToString();
          EXPECT_EQ(device->accepted, host_path) << where;
          EXPECT_EQ(device->next_token, host->next_token) << where;
          device_accept.Skip(static_cast<uint64_t>(device->tries));
          if (!greedy) device_draw.Skip(1);
          EXPECT_EQ(device_accept.Uniform(), host_accept.Uniform()) << where;
          EXPECT_EQ(device_draw.Uniform(), host_draw.Uniform()) << where;
          kept_somewhere += !host_path.empty();
          rejected_somewhere += host_path.size() < static_cast<size_t>(t.depth);
          ++trials;
        }
      }
    }
  }
  EXPECT_GT(kept_somewhere, trials / 5);
  EXPECT_GT(rejected_somewhere, trials / 5);
  EXPECT_GT(dropped, 0) << "some draws found no mass";
}

// The relaxations the relaxed cases run: LANTERN's additive and LANTERN++'s multiplicative
// bounds, none to many neighbours (k = 0 pools nothing: the lossless walk).
struct Relaxation {
  Pooling kind;
  int64_t k;
  double delta_or_lambda;
};
const std::vector<Relaxation>& Relaxations() {
  static const std::vector<Relaxation> kAll = {{Pooling::kAdditive, 0, 0.3},
                                               {Pooling::kAdditive, 3, 0.05},
                                               {Pooling::kAdditive, 8, 0.3},
                                               {Pooling::kMultiplicative, 3, 1.5},
                                               {Pooling::kMultiplicative, 12, 3.0}};
  return kAll;
}

// The latent neighbours of kVocab random 3-d codes (every other token, nearest first).
std::shared_ptr<const LatentNeighbors> Neighbours() {
  at::manual_seed(4242);
  return std::make_shared<LatentNeighbors>(
      LatentNeighbors::Build(torch::randn({kVocab, 3}), kVocab - 1));
}

int64_t Widest(const std::vector<int64_t>& parents) {
  std::vector<int64_t> children(parents.size() + 1, 0);
  for (int64_t parent : parents) ++children[parent + 1];
  return std::max<int64_t>(1, *std::max_element(children.begin(), children.end()));
}

// One relaxed case against the host walk: the path, the next token, the counts and where the
// streams end. `p_device` root row first; `host_rows` maps the host tree's drafts (the live
// ones) to the device's.
struct RelaxedCase {
  DraftBatch host_drafts;            // what the host verifies (dropped drafts left out)
  torch::Tensor host_p;              // its rows, the root's last
  std::vector<int64_t> host_to_device;
  TreeCall device;                   // the whole tree, numbers not yet set
  int64_t size = 0;
};

void ExpectTheHostWalksRelaxedDecisions(const RelaxedCase& c, const Relaxation& relaxation,
                                        bool greedy, int64_t seed, const std::string& where,
                                        int* relaxed_somewhere, int* pooled_somewhere) {
  const auto neighbours = Neighbours();
  PoolingRule rule{relaxation.kind, relaxation.k};
  if (relaxation.kind == Pooling::kAdditive) rule.delta = relaxation.delta_or_lambda;
  if (relaxation.kind == Pooling::kMultiplicative) rule.lambda = relaxation.delta_or_lambda;
  const TreeVerifier verifier(AcceptRule(), TreeRelaxation{rule, neighbours});
  Rng host_accept(seed, RngStream::kAcceptance), host_draw(seed, RngStream::kTarget);
  Rng device_accept(seed, RngStream::kAcceptance), device_draw(seed, RngStream::kTarget);
  for (int64_t i = 0; i < seed % 3; ++i) {  // mid-stream
    host_accept.Uniform();
    device_accept.Uniform();
  }
  auto host = verifier.Verify({c.host_drafts, c.host_p, greedy}, {&host_accept, &host_draw});
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  RelaxedTreeCall call;
  call.tree = c.device;
  call.tree.greedy = greedy;
  call.tree.accept_uniforms = StreamUniforms(device_accept, 2 * c.size + 1, torch::kCPU);
  call.tree.draw_uniform = StreamUniforms(device_draw, 1, torch::kCPU);
  call.table = neighbours->host_table();
  call.kind = relaxation.kind;
  call.k = relaxation.k;
  call.bound = torch::full({1}, relaxation.kind == Pooling::kAdditive
                                    ? relaxation.delta_or_lambda
                                    : relaxation.delta_or_lambda - 1.0,
                           torch::kFloat64);
  const torch::Tensor judged = JudgeRelaxedTree(call);
  std::vector<int64_t> values(judged.data_ptr<int64_t>(),
                              judged.data_ptr<int64_t>() + judged.numel());
  auto device = RelaxedTreeDecisionFromHost(values, c.size, call.tree.max_depth);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::vector<int64_t> host_path;
  for (int64_t j : host->accepted) host_path.push_back(c.host_to_device[j]);
  EXPECT_EQ(device->decision.accepted, host_path) << where;
  EXPECT_EQ(device->decision.next_token, host->next_token) << where;
  std::vector<int64_t> host_relaxed;  // the host's relaxed drafts, in the device's numbering
  for (int64_t j : host->relaxed) host_relaxed.push_back(c.host_to_device[j]);
  EXPECT_EQ(device->relaxed, host_relaxed) << where;
  EXPECT_EQ(device->pooled_drafts, host->pooled_drafts) << where;
  EXPECT_EQ(device->pooled_neighbors, host->pooled_neighbors) << where;
  device_accept.Skip(static_cast<uint64_t>(device->decision.tries));
  if (!greedy) device_draw.Skip(1);
  EXPECT_EQ(device_accept.Uniform(), host_accept.Uniform()) << where;
  EXPECT_EQ(device_draw.Uniform(), host_draw.Uniform()) << where;
  *relaxed_somewhere += host->relaxed_accepts() > 0;
  *pooled_somewhere += host->pooled_neighbors > 0;
}

TEST(TreeRejectionTest, TheRelaxedDeviceWalkMakesTheHostWalksDecisions) {
  int relaxed = 0, pooled = 0;
  for (int64_t size : {0, 1, 5, 14, 30}) {
    for (int64_t max_children : {1, 3, 6}) {
      for (bool greedy : {false, true}) {
        for (int64_t seed = 0; seed < 4; ++seed) {
          // A soft p in both cases: greedy relaxed verification pools the untempered
          // distribution.
          const Tree t = RandomTree(size, max_children, (seed % 4) / 3.0, /*greedy=*/false,
                                    3000 + 100 * size + 10 * max_children + seed);
          RelaxedCase c;
          c.size = size;
          c.host_drafts = DraftBatch{t.tokens, t.parents, torch::Tensor()};
          c.host_p = t.p_host;
          for (int64_t i = 0; i < size; ++i) c.host_to_device.push_back(i);
          c.device = TreeCall{t.p_device, torch::tensor(t.tokens, torch::kInt64),
                              torch::tensor(t.parents, torch::kInt64), torch::Tensor(),
                              torch::Tensor(), greedy, t.depth};
          c.device.max_children = Widest(t.parents);
          for (const Relaxation& relaxation : Relaxations()) {
            const std::string where =
                "deterministic, size " + std::to_string(size) + ", children " +
                std::to_string(max_children) + ", greedy " + std::to_string(greedy) +
                ", seed " + std::to_string(seed) + ", " + PoolingName(relaxation.kind) +
                " k " + std::to_string(relaxation.k);
            ExpectTheHostWalksRelaxedDecisions(c, relaxation, greedy, seed, where, &relaxed,
                                               &pooled);
          }
        }
      }
    }
  }
  EXPECT_GT(relaxed, 10) << "the relaxation kept drafts the exact rule rejected";
  EXPECT_GT(pooled, 10);
}

TEST(TreeRejectionTest, TheRelaxedDeviceWalkMakesTheHostWalksDecisionsOnStaticTrees) {
  int relaxed = 0, pooled = 0;
  for (int64_t size : {1, 5, 14, 30}) {
    for (int64_t max_children : {1, 3, 5}) {
      for (bool greedy : {false, true}) {
        for (int64_t seed = 0; seed < 4; ++seed) {
          // Sampled draws either way: greedy verification reads p alone.
          const StaticTree t = RandomStaticTree(size, max_children, (seed % 4) / 3.0,
                                                /*greedy=*/false, seed % 2 == 1,
                                                7000 + 100 * size + 10 * max_children + seed);
          RelaxedCase c;
          c.size = size;
          std::vector<int64_t> kept_index(size, -1);
          for (int64_t i = 0; i < size; ++i) {
            const int64_t parent = t.parents[i];
            if (!t.valid[i] || (parent >= 0 && kept_index[parent] < 0)) continue;
            kept_index[i] = static_cast<int64_t>(c.host_to_device.size());
            c.host_to_device.push_back(i);
            c.host_drafts.tokens.push_back(t.tokens[i]);
            c.host_drafts.parents.push_back(parent < 0 ? -1 : kept_index[parent]);
          }
          const torch::Tensor nodes = torch::tensor(c.host_to_device, torch::kInt64);
          c.host_drafts.q = t.q.index_select(0, nodes);
          c.host_p = torch::cat({t.p_device.index_select(0, nodes + 1), t.p_device.narrow(0, 0, 1)});
          std::vector<uint8_t> valid(t.valid.begin(), t.valid.end());
          c.device = TreeCall{t.p_device, torch::tensor(t.tokens, torch::kInt64),
                              torch::tensor(t.parents, torch::kInt64), torch::Tensor(),
                              torch::Tensor(), greedy, t.depth};
          c.device.q = t.q;
          c.device.valid = torch::tensor(valid, torch::kUInt8).to(torch::kBool);
          c.device.max_children = std::max<int64_t>(1, t.widest);
          for (const Relaxation& relaxation : Relaxations()) {
            const std::string where =
                "static, size " + std::to_string(size) + ", children " +
                std::to_string(max_children) + ", greedy " + std::to_string(greedy) +
                ", seed " + std::to_string(seed) + ", " + PoolingName(relaxation.kind) +
                " k " + std::to_string(relaxation.k);
            ExpectTheHostWalksRelaxedDecisions(c, relaxation, greedy, seed, where, &relaxed,
                                               &pooled);
          }
        }
      }
    }
  }
  EXPECT_GT(relaxed, 10) << "the relaxation kept drafts the exact rule rejected";
  EXPECT_GT(pooled, 10);
}

// TreeAncestors' squarings find every ancestor, for trees as deep as the bound says.
TEST(TreeRejectionTest, AncestorsAreEveryNodeAboveAndItself) {
  for (int64_t size : {1, 5, 30, 60}) {
    for (int64_t max_children : {1, 2, 10}) {
      const Tree t = RandomTree(size, max_children, 0.0, false, 77 * size + max_children);
      const torch::Tensor found = TreeAncestors(torch::tensor(t.parents, torch::kInt64), t.depth);
      ASSERT_EQ(found.sizes(), torch::IntArrayRef({size, size}));
      for (int64_t i = 0; i < size; ++i) {
        std::vector<bool> expected(size, false);
        for (int64_t a = i; a >= 0; a = t.parents[a]) expected[a] = true;
        for (int64_t j = 0; j < size; ++j) {
          EXPECT_EQ(found[i][j].item<bool>(), expected[j])
              << "size " << size << ", children " << max_children << ", " << i << " " << j;
        }
      }
    }
  }
}

TEST(TreeRejectionTest, DecisionsAreCheckedWhenRead) {
  EXPECT_FALSE(TreeDecisionFromHost({1, 0, 3}, 4, 1).ok());         // too few values
  EXPECT_FALSE(TreeDecisionFromHost({1, 0, 3, 7}, 4, 1).ok());      // node out of range
  EXPECT_FALSE(TreeDecisionFromHost({2, 0, 3, 1}, 4, 1).ok());      // path past the depth
  auto ok = TreeDecisionFromHost({1, 2, 3, 1, -1}, 4, 2);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->accepted, std::vector<int64_t>({1}));
  EXPECT_EQ(ok->next_token, 3);
  EXPECT_EQ(ok->tries, 2);
}

// EAGLE-2's tree (60 drafts, depth 7): the same operators whatever the tree and the walk (no
// loop over levels, nothing read back), a few hundred dispatched.
TEST(TreeRejectionTest, OperatorsDoNotDependOnTheWalk) {
  for (bool greedy : {false, true}) {
    std::vector<int64_t> counts;
    for (const auto& [seed, closeness] : std::vector<std::pair<int64_t, double>>{
             {7, 0.0}, {8, 0.6}, {9, 1.0}}) {
      const Tree t = RandomTree(60, 10, closeness, greedy, seed);
      Rng accept(3, RngStream::kAcceptance), draw(3, RngStream::kTarget);
      TreeCall call{t.p_device, torch::tensor(t.tokens, torch::kInt64),
                    torch::tensor(t.parents, torch::kInt64),
                    StreamUniforms(accept, 60, torch::kCPU), StreamUniforms(draw, 1, torch::kCPU),
                    greedy, 8};
      OpCounting counting;
      const int64_t before = ThreadOpCounts().dispatched;
      JudgeTree(call);
      counts.push_back(ThreadOpCounts().dispatched - before);
    }
    EXPECT_EQ(counts[0], counts[1]) << "greedy " << greedy;
    EXPECT_EQ(counts[0], counts[2]) << "greedy " << greedy;
    EXPECT_LE(counts[0], 400) << "greedy " << greedy;
  }
}

}  // namespace
}  // namespace mulo::engine
