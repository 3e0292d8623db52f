// Every way a checkpoint can be broken yields an error that names the file and the key, and
// never a crash.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "engine/model/checkpoint.h"
#include "engine/model/safetensors.h"
#include "engine/model/transformer.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::TempPath;

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A safetensors file with the given header text followed by `data_bytes` zero bytes.
std::string RawFile(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(out.data(), &len, 8);
  return out + header + std::string(data_bytes, '\0');
}

std::map<std::string, torch::Tensor> TarTinyWeights() {
  return testing::ReadAll(FixtureDir("tar_tiny") + "/model.safetensors");
}

StatusOr<std::shared_ptr<const Transformer>> LoadTarTinyFrom(const std::string& path) {
  auto config = LoadTransformerConfig(FixtureDir("tar_tiny") + "/config.json");
  EXPECT_TRUE(config.ok());
  return Transformer::Load(*config, path, LoadOptions());
}

void ExpectError(const Status& status, StatusCode code, const std::string& path,
                 const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  for (const auto& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << status.message();
  }
}

TEST(CheckpointErrorsTest, MissingKey) {
  auto weights = TarTinyWeights();
  weights.erase("norm.weight");
  const std::string path = TempPath("missing_key.safetensors");
  ASSERT_OK(WriteSafetensors(path, weights));
  ExpectError(LoadTarTinyFrom(path).status(), StatusCode::kNotFound, path,
              {"missing key 'norm.weight'", "[64]"});
}

TEST(CheckpointErrorsTest, UnexpectedShape) {
  auto weights = TarTinyWeights();
  weights["output.weight"] = torch::zeros({127, 64});
  const std::string path = TempPath("bad_shape.safetensors");
  ASSERT_OK(WriteSafetensors(path, weights));
  ExpectError(LoadTarTinyFrom(path).status(), StatusCode::kInvalidArgument, path,
              {"key 'output.weight'", "expected shape [128, 64]", "found [127, 64]"});
}

TEST(CheckpointErrorsTest, UnknownDtype) {
  const std::string path = TempPath("unknown_dtype.safetensors");
  WriteBytes(path, RawFile(R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2));
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, path,
              {"key 'w'", "unknown dtype 'F8_E4M3'"});
}

TEST(CheckpointErrorsTest, TruncatedData) {
  const std::string good = FixtureDir("tar_tiny") + "/model.safetensors";
  std::string bytes = ReadBytes(good);
  const std::string path = TempPath("truncated.safetensors");
  WriteBytes(path, bytes.substr(0, bytes.size() - 100));
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, path,
              {"truncated data", "key '"});
}

TEST(CheckpointErrorsTest, HeaderLargerThanFile) {
  const std::string path = TempPath("huge_header.safetensors");
  std::string bytes = RawFile("{}", 0);
  const uint64_t huge = 1ULL << 40;
  std::memcpy(bytes.data(), &huge, 8);
  WriteBytes(path, bytes);
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, path,
              {"header length 1099511627776 is larger than the file"});
}

TEST(CheckpointErrorsTest, MalformedJson) {
  const std::string path = TempPath("bad_json.safetensors");
  WriteBytes(path, RawFile(R"({"w": {"dtype": "F32", "shape": [1],)", 0));
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, path,
              {"malformed JSON header"});
}

TEST(CheckpointErrorsTest, FileShorterThanLengthField) {
  const std::string path = TempPath("tiny.safetensors");
  WriteBytes(path, "abc");
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, path,
              {"too short"});
}

TEST(CheckpointErrorsTest, BytesDoNotMatchShape) {
  const std::string path = TempPath("size_mismatch.safetensors");
  WriteBytes(path, RawFile(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, path,
              {"key 'w'", "8 bytes do not hold shape [3] of F32"});
}

// Found by tests/fuzz/safetensors_fuzzer: nlohmann's parser throws out_of_range, not
// parse_error, for a number no double holds, which escaped and terminated the process.
TEST(CheckpointErrorsTest, NumberTooLargeForADoubleIsDataLoss) {
  const std::string path = TempPath("number_overflow.safetensors");
  WriteBytes(path, RawFile(R"({"w":{"dtype":"F32","shape":[1E5555],"data_offsets":[0,4]}})", 4));
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, path,
              {"malformed JSON header", "number overflow"});
}

// [2^32, 2^32] F32 is 2^66 bytes, which wraps to 0 in 64 bits and would match empty offsets.
TEST(CheckpointErrorsTest, ShapeWhoseSizeOverflowsIsRefused) {
  const std::string path = TempPath("overflow.safetensors");
  WriteBytes(path, RawFile(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],)"
                           R"("data_offsets":[0,0]}})", 0));
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kDataLoss, path,
              {"key 'w'", "more than 2^62 elements"});
}

TEST(CheckpointErrorsTest, MissingFileIsNotFound) {
  const std::string path = TempPath("does_not_exist.safetensors");
  ExpectError(SafetensorsFile::Open(path).status(), StatusCode::kNotFound, path, {"cannot open"});
}

TEST(SafetensorsTest, HalfPrecisionConvertsToComputeDtype) {
  auto values = torch::tensor({1.0f, -2.5f, 3.140625f, 65504.0f});
  const std::string path = TempPath("halves.safetensors");
  ASSERT_OK(WriteSafetensors(path, {{"f16", values.to(torch::kFloat16)},
                                    {"bf16", values.to(torch::kBFloat16)},
                                    {"f32", values},
                                    {"ids", torch::tensor({3, 4}, torch::kInt64)}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_OK(file);
  EXPECT_EQ(file->tensors().at("f16").dtype, "F16");
  EXPECT_EQ(file->tensors().at("bf16").dtype, "BF16");
  for (const char* key : {"f16", "bf16", "f32"}) {
    auto t = file->Read(key, torch::kFloat32, torch::kCPU);
    ASSERT_OK(t);
    EXPECT_EQ(t->scalar_type(), torch::kFloat32);
    const std::string name = key;
    const auto stored = name == "bf16" ? torch::kBFloat16
                        : name == "f16" ? torch::kFloat16
                                        : torch::kFloat32;
    EXPECT_TRUE(torch::equal(*t, values.to(stored).to(torch::kFloat32))) << key;
  }
  auto ids = file->Read("ids", torch::kFloat32, torch::kCPU);
  ASSERT_OK(ids);
  EXPECT_EQ(ids->scalar_type(), torch::kInt64);  // integers keep their type
  auto as_half = file->Read("f32", torch::kFloat16, torch::kCPU);
  ASSERT_OK(as_half);
  EXPECT_EQ(as_half->scalar_type(), torch::kFloat16);
}

TEST(CheckpointTest, UnusedKeysAreListed) {
  auto weights = TarTinyWeights();
  weights["encoder.extra.weight"] = torch::zeros({2});
  const std::string path = TempPath("extra_key.safetensors");
  ASSERT_OK(WriteSafetensors(path, weights));
  auto ckpt = Checkpoint::Open(path, LoadOptions());
  ASSERT_OK(ckpt);
  ASSERT_OK(ckpt->Get("norm.weight", {64}));
  auto unused = ckpt->UnusedKeys();
  EXPECT_NE(std::find(unused.begin(), unused.end(), "encoder.extra.weight"), unused.end());
  EXPECT_EQ(std::find(unused.begin(), unused.end(), "norm.weight"), unused.end());
}

}  // namespace
}  // namespace mulo::engine
