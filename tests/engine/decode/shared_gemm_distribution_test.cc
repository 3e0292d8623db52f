// Lossless inside batches of 8 with shared GEMMs (docs/design.md, "Exactness policy"): the
// per-request-exact mode keeps every request's lone tokens bit for bit, so the lone proofs
// carry over; shared GEMMs (a GPU batch, --batch_gemms=shared) change the logits' last bits,
// so the proof there is the distribution's. Requests of ar, speculative and SJD under two
// different conditions decode through one engine loop, 8 at a time with shared GEMMs, and
// each (method, condition)'s tokens 1 and 2 are tested against ar's exact marginals for its
// own condition (sd_fixture.h: Pearson at 99.9%). Two controls must fail: each kind's images
// against the other condition's law (what a request reading another's logits rows would
// follow), and the same batches with speculative's acceptance rule broken (keep every draft).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "engine/core/cpu_threads.h"
#include "engine/decode/ar.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/sjd.h"
#include "engine/decode/speculative.h"
#include "engine/sampling/rng.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::ExactMarginals;
using testing::LoadSd;
using testing::SdFixture;

constexpr int kConcurrency = 8;
constexpr double kCfg = 2.0;

SamplingParams Sampled(uint64_t seed) { return testing::Sampling(1.0, kCfg, seed); }

// sd_tiny under its recorded condition and under the condition's features reversed: two laws
// far enough apart that a request following the other's is caught.
std::vector<SdFixture> TwoConditions() {
  SdFixture a = LoadSd();
  SdFixture b = a;
  b.condition.features = a.condition.features.flip({0, 1}).contiguous();
  return {a, b};
}

// One (method, condition) pair's requests and the tokens 1 and 2 they drew.
struct Kind {
  const DecodingMethod* method;
  const SdFixture* fixture;
  std::vector<int> token1, token2;
};

struct BatchFigures {
  int64_t forwards = 0, calls = 0, max_calls = 0;
};

// `runs` requests of every kind, interleaved (each batch mixes the kinds), decoded through one
// loop with shared GEMMs, `kConcurrency` at a time, seeds 300000 + i.
BatchFigures DecodeTogether(std::vector<Kind>* kinds, int runs) {
  SetCpuThreads(1);
  BatchFigures figures;
  EngineLoop::Options options;
  options.gemms = PackedGemms::kShared;
  EngineLoop loop(options, [&](const EngineLoop::BatchEvent& event) {
    if (event.component != EngineLoop::Component::kTransformer) return;
    ++figures.forwards;
    figures.calls += event.calls;
    figures.max_calls = std::max(figures.max_calls, event.calls);
  });
  std::vector<EngineLoop::Task> tasks;
  const int n = runs * static_cast<int>(kinds->size());
  for (Kind& kind : *kinds) {
    kind.token1.assign(kind.fixture->models.target->vocab_size(), 0);
    kind.token2 = kind.token1;
  }
  for (int i = 0; i < n; ++i) {
    Kind& kind = (*kinds)[i % kinds->size()];
    tasks.push_back([&kind, &loop, i] {
      NullProgressSink sink;
      CancelToken cancel;
      DecodeRequest request{kind.fixture->condition, Sampled(300000 + i)};
      request.loop = &loop;
      auto result = kind.method->Decode(request, kind.fixture->models, sink, cancel);
      if (!result.ok()) {
        ADD_FAILURE() << kind.method->name() << " request " << i << ": "
                      << result.status().ToString();
        return;
      }
      ++kind.token1[result->tokens[1]];
      ++kind.token2[result->tokens[2]];
    });
  }
  EngineLoop::ListSource source(std::move(tasks), kConcurrency);
  EXPECT_TRUE(loop.Serve(source).ok());
  return figures;
}

struct Verdict {
  double stat1, crit1, stat2, crit2;
  bool follows() const { return stat1 < crit1 && stat2 < crit2; }
};

// `kind`'s tokens against ar's exact marginals under `law`'s condition (numbered `condition`).
Verdict Compare(const Kind& kind, int runs, const SdFixture& law, int condition) {
  const auto [m1, m2] = ExactMarginals(law, Sampled(0));
  const auto [x1, df1] = ChiSquare(kind.token1, m1, runs);
  const auto [x2, df2] = ChiSquare(kind.token2, m2, runs);
  const Verdict v{x1, ChiSquareCritical(df1), x2, ChiSquareCritical(df2)};
  std::cout << "[chi2] " << kind.method->name() << " against condition " << condition << "'s law, " << runs
            << " images in batches of " << kConcurrency << ": token 1 " << v.stat1
            << " (critical " << v.crit1 << "), token 2 " << v.stat2 << " (critical " << v.crit2
            << ")\n";
  return v;
}

TEST(SharedGemmDistributionTest, TheTwoConditionsHaveDifferentLaws) {
  const std::vector<SdFixture> f = TwoConditions();
  const auto a = ExactMarginals(f[0], Sampled(0)).first;
  const auto b = ExactMarginals(f[1], Sampled(0)).first;
  double total_variation = 0;
  for (size_t t = 0; t < a.size(); ++t) total_variation += std::abs(a[t] - b[t]) / 2;
  EXPECT_GT(total_variation, 0.1);
}

TEST(SharedGemmDistributionTest, ArSpeculativeAndSjdFollowArsLawInsideBatchesOf8) {
  constexpr int kRuns = 1500;  // per (method, condition): 9000 images in all
  const std::vector<SdFixture> f = TwoConditions();
  const ArDecoder ar;
  const SpeculativeDecoder speculative({3});
  SjdOptions jacobi;
  jacobi.window = 3;
  jacobi.init = JacobiInit::kRandom;
  const SjdDecoder sjd(jacobi);
  std::vector<Kind> kinds;
  for (const DecodingMethod* method : std::vector<const DecodingMethod*>{&ar, &speculative, &sjd}) {
    for (const SdFixture& fixture : f) kinds.push_back({method, &fixture, {}, {}});
  }
  const BatchFigures figures = DecodeTogether(&kinds, kRuns);
  // The batches were real: the loop carried up to 8 requests' calls per forward.
  EXPECT_EQ(figures.max_calls, kConcurrency);
  EXPECT_GT(static_cast<double>(figures.calls) / figures.forwards, 4.0);
  for (size_t k = 0; k < kinds.size(); ++k) {
    const int own = static_cast<int>(k % 2), other = 1 - own;
    EXPECT_TRUE(Compare(kinds[k], kRuns, f[own], own).follows())
        << kinds[k].method->name() << " under condition " << own
        << " does not follow ar's law inside batches with shared GEMMs";
    // Control: the same counts against the other condition's law (what a request reading
    // another's logits rows would follow) must fail.
    EXPECT_FALSE(Compare(kinds[k], kRuns, f[other], other).follows())
        << kinds[k].method->name() << "'s images pass the other condition's law";
  }
}

TEST(SharedGemmDistributionTest, BrokenAcceptanceRuleFailsTheSameTestInsideBatchesOf8) {
  constexpr int kRuns = 1500;
  const std::vector<SdFixture> f = TwoConditions();
  const SpeculativeDecoder broken(SpeculativeOptions{3, [](double, double, Rng& rng) {
                                                       rng.Uniform();
                                                       return true;  // keeps every draft
                                                     }});
  std::vector<Kind> kinds;
  for (const SdFixture& fixture : f) kinds.push_back({&broken, &fixture, {}, {}});
  DecodeTogether(&kinds, kRuns);
  for (size_t k = 0; k < kinds.size(); ++k) {
    EXPECT_FALSE(Compare(kinds[k], kRuns, f[k], static_cast<int>(k)).follows())
        << "the broken rule passed under condition " << k;
  }
}

}  // namespace
}  // namespace mulo::engine
