// The family loader: family.json -> ModelSet with every component, the neighbour table built
// once, the resident weight bytes accounted exactly, and errors that name what is wrong when
// the file or the components do not fit together.
#include "engine/model/model_set.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

namespace fs = std::filesystem;
using testing::FixtureDir;

const std::string kTiny = FixtureDir("repository/tiny");

// Bytes of every tensor of a component's model.safetensors once loaded as fp32.
int64_t Fp32Bytes(const std::string& component_dir) {
  auto file = SafetensorsFile::Open(component_dir + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  int64_t bytes = 0;
  for (const auto& [key, info] : file->tensors()) {
    int64_t n = 1;
    for (int64_t d : info.shape) n *= d;
    bytes += 4 * n;
  }
  return bytes;
}

TEST(ModelSetTest, LoadsEveryComponentAndCountsTheirWeights) {
  auto set = LoadModelSet(kTiny, LoadOptions());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->name, "tiny");
  EXPECT_DOUBLE_EQ(set->default_cfg_scale, 4.0);
  for (const void* component :
       {static_cast<const void*>(set->target.get()), static_cast<const void*>(set->vq.get()),
        static_cast<const void*>(set->conditioner.get()),
        static_cast<const void*>(set->drafter.get()), static_cast<const void*>(set->chain.get()),
        static_cast<const void*>(set->upsampler.get()),
        static_cast<const void*>(set->downsampler.get()),
        static_cast<const void*>(set->eagle.get()),
        static_cast<const void*>(set->neighbors.get())}) {
    EXPECT_NE(component, nullptr);
  }
  EXPECT_EQ(set->neighbors->codebook_size(), set->vq->config().codebook_size);
  EXPECT_EQ(set->neighbors->max_neighbors(), set->vq->config().codebook_size - 1);
  int64_t expected = set->neighbors->table().nbytes();
  for (const char* c :
       {"target", "vq", "conditioner", "drafter", "chain", "upsampler", "downsampler", "eagle"}) {
    expected += Fp32Bytes(kTiny + "/" + c);
  }
  EXPECT_EQ(set->weight_bytes, expected);
}

// A family directory in the test's temp dir whose components link to the tiny family's.
class BrokenFamily {
 public:
  explicit BrokenFamily(const std::string& name) : dir_(::testing::TempDir() + "/" + name) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* c :
         {"target", "vq", "conditioner", "drafter", "chain", "upsampler", "downsampler"}) {
      fs::create_directory_symlink(fs::absolute(kTiny + "/" + c), dir_ + "/" + c);
    }
  }
  const std::string& dir() const { return dir_; }
  void Write(const std::string& json) { std::ofstream(dir_ + "/family.json") << json; }

 private:
  std::string dir_;
};

TEST(ModelSetTest, ErrorsNameTheFieldOrTheMismatch) {
  BrokenFamily family("broken_family");
  struct Case {
    std::string json, expected;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"components": {"target": "target", "vq": "vq"}})", "name"},
           {R"({"name": "x"})", "components"},
           {R"({"name": "x", "components": {"vq": "vq"}})", "components.target"},
           {R"({"name": "x", "components": {"target": "target"}})", "components.vq"},
           {R"({"name": "x", "default_cfg_scale": -1,
                "components": {"target": "target", "vq": "vq"}})",
            "default_cfg_scale"},
           {R"({"name": "x", "components": {"target": "nowhere", "vq": "vq"}})", "nowhere"},
           // The target (32x32 grid) as MuLo-SD's drafter: x2 up-sampling cannot reach it.
           {R"({"name": "x", "components": {"target": "target", "vq": "vq",
                "drafter": "target", "upsampler": "upsampler"}})",
            "drafter grid x up-sampling factor"},
           {"{not json", "family.json"},
           // A key the loader does not know would leave its component silently missing.
           {R"({"name": "x", "components": {"target": "target", "vq": "vq", "mlm": "m"}})",
            "'components.mlm': unknown component (known: target, conditioner, vq,"},
           {R"({"name": "x", "components": {"target": "target", "vq": "vq", "eagle": 3}})",
            "'components.eagle': must be a directory name"},
       }) {
    family.Write(c.json);
    auto set = LoadModelSet(family.dir(), LoadOptions());
    ASSERT_FALSE(set.ok()) << c.json;
    EXPECT_NE(set.status().message().find(c.expected), std::string::npos)
        << "expected '" << c.expected << "' in: " << set.status().ToString();
  }
  // Only target and vq are required.
  family.Write(R"({"name": "minimal", "components": {"target": "target", "vq": "vq"}})");
  auto minimal = LoadModelSet(family.dir(), LoadOptions());
  ASSERT_TRUE(minimal.ok()) << minimal.status().ToString();
  EXPECT_EQ(minimal->drafter, nullptr);
  EXPECT_EQ(minimal->weight_bytes, Fp32Bytes(kTiny + "/target") + Fp32Bytes(kTiny + "/vq") +
                                       minimal->neighbors->table().nbytes());
}

}  // namespace
}  // namespace mulo::engine
