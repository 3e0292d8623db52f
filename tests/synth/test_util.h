// Helpers shared by the synth tests: fixture paths, a tiny safetensors reader for the Python
// renders, and the held-out prompt set.
#ifndef MULO_TESTS_SYNTH_TEST_UTIL_H_
#define MULO_TESTS_SYNTH_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "synth/heldout.h"
#include "synth/render.h"
#include "synth/scene.h"
#include "synth/synth_eval.h"

namespace mulo::synth::testing {

// Paths inside the test's runfiles.
inline constexpr char kScenesPath[] = "tests/data/synth_render/scenes.json";
inline constexpr char kRendersPath[] = "tests/data/synth_render/renders.safetensors";
inline constexpr char kHeldoutPath[] = "models/synth/heldout_prompts.jsonl";

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct U8Tensor {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// The U8 tensors of a safetensors file: an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}} (offsets relative to the end of
// the header), then the raw bytes. Deliberately independent of engine/'s reader.
inline std::map<std::string, U8Tensor> ReadU8Safetensors(const std::string& path) {
  std::map<std::string, U8Tensor> out;
  const std::string bytes = ReadFile(path);
  if (bytes.size() < 8) {
    ADD_FAILURE() << path << " is too short";
    return out;
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  if (8 + header_len > bytes.size()) {
    ADD_FAILURE() << path << ": header runs past the end";
    return out;
  }
  const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len,
                                            nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    ADD_FAILURE() << path << ": malformed header";
    return out;
  }
  const size_t data_start = 8 + header_len;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    if (info.value("dtype", "") != "U8") {
      ADD_FAILURE() << path << ": " << name << " is not U8";
      continue;
    }
    U8Tensor t;
    int64_t numel = 1;
    for (const auto& d : info.at("shape")) {
      t.shape.push_back(d.get<int64_t>());
      numel *= t.shape.back();
    }
    const auto begin = info.at("data_offsets")[0].get<uint64_t>();
    const auto end = info.at("data_offsets")[1].get<uint64_t>();
    if (end - begin != static_cast<uint64_t>(numel) || data_start + end > bytes.size()) {
      ADD_FAILURE() << path << ": bad offsets for " << name;
      continue;
    }
    t.data.assign(bytes.begin() + data_start + begin, bytes.begin() + data_start + end);
    out[name] = std::move(t);
  }
  return out;
}

inline std::vector<HeldoutEntry> LoadHeldout() {
  auto entries = LoadHeldoutPrompts(kHeldoutPath);
  EXPECT_TRUE(entries.ok()) << entries.status();
  return entries.ok() ? *std::move(entries) : std::vector<HeldoutEntry>();
}

inline cv::Mat RenderOrDie(const Scene& scene, int size) {
  auto image = Render(scene, size);
  EXPECT_TRUE(image.ok()) << image.status();
  return image.ok() ? *image : cv::Mat();
}

// Counts verdicts: overall passes and, per attribute, failures.
struct Tally {
  int total = 0;
  int passed = 0;
  std::map<std::string, int> failed;  // attribute -> verdicts failing it

  void Add(const Verdict& v) {
    ++total;
    passed += v.pass;
    failed["colour"] += !v.color;
    failed["shape"] += !v.shape;
    failed["size"] += !v.size;
    failed["position"] += !v.position;
    failed["background"] += !v.background;
  }
  double PassRate() const { return total == 0 ? 0.0 : static_cast<double>(passed) / total; }
  std::string Summary() const {
    std::string s = std::to_string(passed) + "/" + std::to_string(total) + " pass (" +
                    std::to_string(100.0 * PassRate()) + "%); failures:";
    for (const auto& [attribute, count] : failed)
      s += " " + attribute + "=" + std::to_string(count);
    return s;
  }
};

}  // namespace mulo::synth::testing

#endif  // MULO_TESTS_SYNTH_TEST_UTIL_H_
