// Reader for the safetensors format: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}}, then raw little-endian tensor bytes.
//
// The file is memory-mapped and validated up front (header bounds, JSON, dtypes, shapes,
// offsets within the data), so a corrupt or truncated file yields an error naming the file
// and the key instead of a crash. Floating-point tensors (F32/F16/BF16) are converted to the
// requested compute dtype; integer tensors keep their type.
#ifndef MULO_ENGINE_MODEL_SAFETENSORS_H_
#define MULO_ENGINE_MODEL_SAFETENSORS_H_

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

class MappedFile;

struct TensorInfo {
  std::string dtype;  // as written in the header: "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets within the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Errors name the file (and the key where there is one).
  static StatusOr<SafetensorsFile> Open(const std::string& path);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  bool Contains(const std::string& key) const { return tensors_.count(key) > 0; }

  // Copies the tensor out of the mapping. Floating tensors become `float_dtype` on `device`.
  StatusOr<torch::Tensor> Read(const std::string& key, torch::ScalarType float_dtype,
                               const torch::Device& device) const;

 private:
  SafetensorsFile() = default;

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  const uint8_t* data_ = nullptr;  // start of the data section inside the mapping
  std::map<std::string, TensorInfo> tensors_;
};

// "[2, 3]": shapes as they appear in error messages.
std::string ShapeToString(const std::vector<int64_t>& shape);

// Writes tensors (any of F32/F16/BF16/I64/I32/U8) as a safetensors file. Used by tools and
// tests that need to produce checkpoints from C++.
Status WriteSafetensors(const std::string& path,
                        const std::map<std::string, torch::Tensor>& tensors);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_SAFETENSORS_H_
