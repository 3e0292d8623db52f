#include "tests/engine/decode/table_family.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "engine/model/eagle_head.h"
#include "engine/model/resampler.h"
#include "engine/model/safetensors.h"
#include "engine/sampling/latent_neighbors.h"
#include "tests/engine/test_util.h"

namespace mulo::engine::testing {

TableFamily MakeTableFamily(const std::string& name, TableLaw target, TableLaw chain, TableLaw head,
                            double cfg) {
  TableFamily f;
  f.cfg = cfg;
  f.target = std::make_shared<const TableLaw>(std::move(target));
  f.chain = std::make_shared<const TableLaw>(std::move(chain));
  f.head = std::make_shared<const TableLaw>(std::move(head));
  std::shared_ptr<const TableLaw> conditional = f.target;
  if (cfg != 1.0) {
    f.unconditional = std::make_shared<const TableLaw>(
        TableLaw::Random(f.target->vocab(), f.target->grid(), 4058, 1.0, 0.05));
    conditional = std::make_shared<const TableLaw>(
        TableLaw::ConditionalFor(*f.target, *f.unconditional, cfg));
  }
  auto model = std::make_shared<const TableModel>(conditional, f.head, f.unconditional);
  f.models.name = name;
  f.models.target = model;
  f.models.chain = std::make_shared<const TableModel>(f.chain);
  const std::string dir = TempPath(name + "_eagle");
  WriteLinearEagleHead(dir, f.target->tokens());
  auto eagle = EagleHead::LoadDirectory(dir, *model, LoadOptions());
  EXPECT_TRUE(eagle.ok()) << eagle.status().ToString();
  if (eagle.ok()) f.models.eagle = *eagle;
  const int64_t vocab = f.target->vocab();
  f.models.neighbors = std::make_shared<const LatentNeighbors>(
      LatentNeighbors::Build(torch::arange(vocab, torch::kFloat32).unsqueeze(1), vocab - 1));
  f.condition.class_label = 0;
  return f;
}

TableFamily MakeTableFamily(const std::string& name, const JointTables& tables, double cfg) {
  return MakeTableFamily(name, tables.target, tables.chain, tables.head, cfg);
}

namespace {

void WriteRandomResampler(const std::string& dir, bool up, int64_t vocab, uint64_t seed) {
  std::filesystem::create_directories(dir);
  constexpr int64_t kChannels = 8, kEmbed = 2, kFactor = 2;
  std::ofstream(dir + "/config.json")
      << nlohmann::json{{"kind", up ? "up" : "down"}, {"factor", kFactor},
                        {"channels", kChannels},      {"num_blocks", 0},
                        {"codebook_size", vocab},     {"codebook_embed_dim", kEmbed}}
             .dump();
  at::manual_seed(seed);
  const int64_t r2 = kFactor * kFactor;
  std::map<std::string, torch::Tensor> tensors = {
      {"codebook", torch::randn({vocab, kEmbed})},
      {"conv_in.weight", torch::randn({kChannels, up ? kEmbed : kEmbed * r2, 3, 3})},
      {"conv_in.bias", torch::randn({kChannels})},
      {"norm_out.weight", torch::ones({kChannels})},
      {"conv_out.weight", torch::randn({up ? kEmbed * r2 : kEmbed, kChannels, 1, 1})},
      {"conv_out.bias", torch::randn({up ? kEmbed * r2 : kEmbed})},
      {"logit_scale", torch::tensor(10.0f)},
  };
  const Status written = WriteSafetensors(dir + "/model.safetensors", tensors);
  EXPECT_TRUE(written.ok()) << written.ToString();
}

}  // namespace

void AddMuloComponents(TableFamily* family, const std::string& name, TableLaw drafter,
                       uint64_t seed) {
  const int64_t vocab = family->target->vocab();
  family->models.drafter =
      std::make_shared<const TableModel>(std::make_shared<const TableLaw>(std::move(drafter)));
  const std::string up = TempPath(name + "_up"), down = TempPath(name + "_down");
  WriteRandomResampler(up, true, vocab, seed);
  WriteRandomResampler(down, false, vocab, seed + 1);
  auto u = Resampler::LoadDirectory(up, LoadOptions());
  auto d = Resampler::LoadDirectory(down, LoadOptions());
  EXPECT_TRUE(u.ok() && d.ok());
  if (u.ok()) family->models.upsampler = *u;
  if (d.ok()) family->models.downsampler = *d;
}

std::vector<std::vector<int64_t>> MuloUpsampled(const TableFamily& family) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t d = 0; d < family.models.drafter->vocab_size(); ++d) {
    auto ids = family.models.upsampler->Apply(std::vector<int64_t>{d}, 1, 1);
    EXPECT_TRUE(ids.ok());
    out.push_back(ids.ok() ? *ids : std::vector<int64_t>());
  }
  return out;
}

JointTables LoadHardTables() {
  std::ifstream in(FixtureDir("table_laws/hard.json"));
  EXPECT_TRUE(in.good()) << "tests/data/table_laws/hard.json is missing";
  const nlohmann::json doc = nlohmann::json::parse(in);
  return JointTables{TableLaw::FromJson(doc.at("target").dump()),
                     TableLaw::FromJson(doc.at("chain").dump()),
                     TableLaw::FromJson(doc.at("head").dump())};
}

SamplingParams TableSampling(uint64_t seed, double cfg) {
  SamplingParams s;
  s.temperature = 1.0;
  s.cfg_scale = cfg;
  s.seed = seed;
  return s;
}

StatusOr<DecodeResult> Decode(const DecodingMethod& method, const TableFamily& family,
                              const SamplingParams& sampling) {
  NullProgressSink sink;
  CancelToken cancel;
  DecodeRequest request{family.condition, sampling};
  return method.Decode(request, family.models, sink, cancel);
}

JointCheck PearsonJoint(const std::vector<int64_t>& counts, const std::vector<double>& law,
                        int64_t runs) {
  JointCheck check;
  check.runs = runs;
  double pooled_observed = 0, pooled_expected = 0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = law[i] * static_cast<double>(runs);
    const double observed = static_cast<double>(counts[i]);
    if (expected < 5) {
      pooled_observed += observed;
      pooled_expected += expected;
      continue;
    }
    check.statistic += (observed - expected) * (observed - expected) / expected;
    ++cells;
  }
  if (pooled_expected > 0 || pooled_observed > 0) {
    const double d = pooled_observed - pooled_expected;
    check.statistic += d * d / std::max(pooled_expected, 1e-9);
    ++cells;
  }
  check.df = std::max(1, cells - 1);
  check.critical = ChiSquareCritical999(check.df);
  return check;
}

std::vector<int64_t> SampleImages(const DecodingMethod& method, const TableFamily& family,
                                  int64_t runs, uint64_t seed0) {
  const TableLaw& law = *family.target;
  std::vector<int64_t> counts(law.images(), 0);
  for (int64_t i = 0; i < runs; ++i) {
    auto result =
        Decode(method, family, TableSampling(seed0 + static_cast<uint64_t>(i), family.cfg));
    if (!result.ok()) {
      ADD_FAILURE() << method.name() << " seed " << seed0 + i << ": " << result.status().ToString();
      break;
    }
    const std::vector<int64_t> image(result->tokens.begin(), result->tokens.end());
    if (static_cast<int64_t>(image.size()) != law.tokens()) {
      ADD_FAILURE() << method.name() << " decoded " << image.size() << " tokens";
      break;
    }
    ++counts[law.ImageIndex(image)];
  }
  return counts;
}

JointCheck CheckJoint(const std::string& label, const DecodingMethod& method,
                      const TableFamily& family, const std::vector<double>& law, int64_t runs) {
  const JointCheck check = PearsonJoint(SampleImages(method, family, runs), law, runs);
  std::cout << "[joint] " << label << ": chi2 " << check.statistic << " df " << check.df
            << " critical " << check.critical << " runs " << runs << std::endl;
  return check;
}

}  // namespace mulo::engine::testing
