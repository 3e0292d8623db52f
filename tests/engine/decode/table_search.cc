// Makes the exact-joint tests' tables hard (issue 58): a hill-climb over the target, chain
// and EAGLE-head tables that maximises the smallest noncentrality per image among the
// controls (joint_settings.h), so that every broken rule shows in the fewest images. The file
// also records the controls' noncentralities on five random tables: for the committed table
// (seed 58, 20,000 iterations, 6 min 49 s on this machine) the weakest control of each random
// table was 14-307 times weaker than the searched table's weakest (0.052 per image).
//
//   bazel run -c opt //tests/engine/decode:table_search -- \
//       --out=$PWD/tests/data/table_laws/hard.json
//
// Deterministic for a given --seed and --iterations (no wall-clock stop).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "tests/engine/decode/joint_settings.h"

namespace mulo::engine::testing {
namespace {

struct Scored {
  std::vector<double> noncentrality;  // per control
  double objective = 0;               // the smallest
};

Scored Score(const JointTables& tables, const std::vector<Control>& controls) {
  Scored s;
  const Law exact = tables.target.Joint();
  s.objective = 1e300;
  for (const Control& c : controls) {
    s.noncentrality.push_back(Noncentrality(c.law(tables), exact));
    s.objective = std::min(s.objective, s.noncentrality.back());
  }
  return s;
}

// One row of `law` moved in log space by N(0, sigma) per entry, floored and renormalised.
void Perturb(TableLaw* law, std::mt19937_64& gen, double floor) {
  std::vector<std::vector<double>> rows = law->rows();
  std::uniform_int_distribution<size_t> pick(0, rows.size() - 1);
  const double sigmas[] = {0.3, 1.0, 3.0};
  std::normal_distribution<double> noise(0.0, sigmas[gen() % 3]);
  std::vector<double>& row = rows[pick(gen)];
  double total = 0;
  for (double& p : row) total += (p = std::exp(std::log(p) + noise(gen)));
  double kept = 0;
  for (double& p : row) kept += (p = std::max(p / total, floor));
  for (double& p : row) p /= kept;
  law->set_rows(std::move(rows));
}

nlohmann::json Tables(const JointTables& t) {
  return {{"target", nlohmann::json::parse(t.target.ToJson())},
          {"chain", nlohmann::json::parse(t.chain.ToJson())},
          {"head", nlohmann::json::parse(t.head.ToJson())}};
}

int Main(int argc, char** argv) {
  std::string out;
  uint64_t seed = 58;
  int64_t iterations = 20000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--out=", 0) == 0) out = arg.substr(6);
    if (arg.rfind("--seed=", 0) == 0) seed = std::stoull(arg.substr(7));
    if (arg.rfind("--iterations=", 0) == 0) iterations = std::stoll(arg.substr(13));
  }
  if (out.empty()) {
    std::cerr << "usage: table_search --out=FILE [--seed=58] [--iterations=20000]\n";
    return 2;
  }
  const std::vector<Control> controls = JointControls();
  constexpr double kFloor = 1e-3;
  // The random tables' scores: what a table nobody searched shows.
  nlohmann::json random = nlohmann::json::array();
  for (uint64_t s = 0; s < 5; ++s) {
    const JointTables t{TableLaw::Random(kJointVocab, kJointGrid, seed + 10 * s),
                        TableLaw::Random(kJointVocab, kJointGrid, seed + 10 * s + 1),
                        TableLaw::Random(kJointVocab, kJointGrid, seed + 10 * s + 2)};
    random.push_back(Score(t, controls).noncentrality);
  }
  JointTables best{TableLaw::Random(kJointVocab, kJointGrid, seed),
                   TableLaw::Random(kJointVocab, kJointGrid, seed + 1),
                   TableLaw::Random(kJointVocab, kJointGrid, seed + 2)};
  Scored score = Score(best, controls);
  std::mt19937_64 gen(seed);
  std::cout << "start: smallest noncentrality per image " << score.objective << "\n";
  for (int64_t i = 0; i < iterations; ++i) {
    JointTables next = best;
    const uint64_t which = gen() % 10;  // the target most often: every control reads it
    Perturb(which < 6 ? &next.target : which < 8 ? &next.chain : &next.head, gen, kFloor);
    Scored s = Score(next, controls);
    if (s.objective >= score.objective) {
      if (s.objective > score.objective * 1.01) {
        std::cout << "iteration " << i << ": " << s.objective << "\n";
      }
      best = std::move(next);
      score = std::move(s);
    }
  }
  nlohmann::json doc = Tables(best);
  doc["search"] = {{"seed", seed}, {"iterations", iterations}, {"floor", kFloor}};
  nlohmann::json per = nlohmann::json::object(), random_per = nlohmann::json::object();
  for (size_t c = 0; c < controls.size(); ++c) {
    per[controls[c].name] = score.noncentrality[c];
    std::vector<double> r;
    for (const auto& row : random) r.push_back(row[c].get<double>());
    random_per[controls[c].name] = r;
    std::cout << controls[c].name << ": " << score.noncentrality[c] << " per image (random tables:";
    for (double v : r) std::cout << " " << v;
    std::cout << ")\n";
  }
  doc["noncentrality_per_image"] = per;
  doc["random_tables_noncentrality_per_image"] = random_per;
  std::ofstream(out) << doc.dump(1) << "\n";
  std::cout << "wrote " << out << "\n";
  return 0;
}

}  // namespace
}  // namespace mulo::engine::testing

int main(int argc, char** argv) { return mulo::engine::testing::Main(argc, argv); }
