#include "engine/model/checkpoint.h"

namespace mulo::engine {

StatusOr<Checkpoint> Checkpoint::Open(const std::string& path, const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  return Checkpoint(std::move(file), options);
}

StatusOr<torch::Tensor> Checkpoint::Get(const std::string& key, const std::vector<int64_t>& shape) {
  auto it = file_.tensors().find(key);
  if (it == file_.tensors().end()) {
    return NotFoundError(file_.path() + ": missing key '" + key + "' (expected shape " +
                         ShapeToString(shape) + ")");
  }
  if (it->second.shape != shape) {
    return InvalidArgumentError(file_.path() + ": key '" + key + "': expected shape " +
                                ShapeToString(shape) + ", found " +
                                ShapeToString(it->second.shape));
  }
  used_.insert(key);
  MULO_ASSIGN_OR_RETURN(torch::Tensor tensor, file_.Read(key, options_.dtype, options_.device));
  if (options_.loaded_bytes) *options_.loaded_bytes += static_cast<int64_t>(tensor.nbytes());
  return tensor;
}

StatusOr<torch::Tensor> Checkpoint::GetOptional(const std::string& key,
                                                const std::vector<int64_t>& shape) {
  if (file_.tensors().count(key) == 0) return torch::Tensor();
  return Get(key, shape);
}

std::vector<std::string> Checkpoint::UnusedKeys() const {
  std::vector<std::string> unused;
  for (const auto& [key, info] : file_.tensors()) {
    if (!used_.count(key)) unused.push_back(key);
  }
  return unused;
}

}  // namespace mulo::engine
