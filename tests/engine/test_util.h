// Helpers shared by the engine tests: fixture paths, reference outputs, tensor comparison.
#ifndef MULO_TESTS_ENGINE_TEST_UTIL_H_
#define MULO_TESTS_ENGINE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <torch/types.h>

#include <cstdlib>
#include <map>
#include <string>

#include "engine/core/status.h"
#include "engine/model/condition.h"
#include "engine/model/safetensors.h"
#include "engine/model/transformer.h"

namespace mulo::engine::testing {

// tests/data/<name> inside the test's runfiles.
inline std::string FixtureDir(const std::string& name) { return "tests/data/" + name; }

// <name> in the test's scratch directory ($TEST_TMPDIR, or /tmp outside Bazel).
inline std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// Every tensor of a safetensors file, floats as float32 on the CPU.
inline std::map<std::string, torch::Tensor> ReadAll(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  std::map<std::string, torch::Tensor> out;
  if (!file.ok()) return out;
  for (const auto& [key, info] : file->tensors()) {
    auto t = file->Read(key, torch::kFloat32, torch::kCPU);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (t.ok()) out[key] = *t;
  }
  return out;
}

inline double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// The reference fixture's condition (the "cond" tensor) for the model's condition mode.
inline Condition FixtureCondition(const TokenModel& model,
                                  const std::map<std::string, torch::Tensor>& expected) {
  Condition c;
  const auto& cond = expected.at("cond");
  if (model.condition_shape().mode == ConditionMode::kClassLabel) {
    c.class_label = cond.flatten()[0].item<int64_t>();
  } else {
    c.features = cond.squeeze(0);
  }
  return c;
}

inline std::shared_ptr<const Transformer> LoadFixtureModel(const std::string& name) {
  auto model = Transformer::LoadDirectory(FixtureDir(name), LoadOptions());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? *model : nullptr;
}

inline const Status& ToStatus(const Status& s) { return s; }
template <typename T>
const Status& ToStatus(const StatusOr<T>& s) {
  return s.status();
}

#define ASSERT_OK(expr)                                                  \
  do {                                                                   \
    const ::mulo::engine::Status mulo_test_status_ =                    \
        ::mulo::engine::testing::ToStatus(expr);                         \
    ASSERT_TRUE(mulo_test_status_.ok()) << mulo_test_status_.ToString(); \
  } while (0)

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_TEST_UTIL_H_
