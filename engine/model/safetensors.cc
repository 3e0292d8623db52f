#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/torch_guard.h"

namespace mulo::engine {
namespace {

struct DtypeSpec {
  const char* name;
  torch::ScalarType type;
  int bytes;
  bool is_float;
};

constexpr DtypeSpec kDtypes[] = {
    {"F32", torch::kFloat32, 4, true},  {"F16", torch::kFloat16, 2, true},
    {"BF16", torch::kBFloat16, 2, true}, {"F64", torch::kFloat64, 8, true},
    {"I64", torch::kInt64, 8, false},   {"I32", torch::kInt32, 4, false},
    {"U8", torch::kUInt8, 1, false},
};

const DtypeSpec* FindDtype(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

const DtypeSpec* FindDtype(torch::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (type == d.type) return &d;
  }
  return nullptr;
}

bool IsLittleEndianHost() {
  const uint16_t probe = 1;
  uint8_t first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

// One header entry (dtype, shape, data_offsets), checked against itself and the data section's
// `data_size` bytes; errors start with `where`.
StatusOr<TensorInfo> ParseEntry(const std::string& where, const nlohmann::json& entry,
                                uint64_t data_size) {
  TensorInfo info;
  if (!entry["dtype"].is_string()) return DataLossError(where + ": dtype is not a string");
  info.dtype = entry["dtype"].get<std::string>();
  const DtypeSpec* dtype = FindDtype(info.dtype);
  if (dtype == nullptr) {
    return DataLossError(where + ": unknown dtype '" + info.dtype +
                         "' (supported: F32, F16, BF16, F64, I64, I32, U8)");
  }
  const auto& shape = entry["shape"];
  if (!shape.is_array()) return DataLossError(where + ": shape is not an array");
  uint64_t numel = 1;
  for (const auto& dim : shape) {
    if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
      return DataLossError(where + ": shape has a non-integer or negative dimension");
    }
    info.shape.push_back(dim.get<int64_t>());
    // A shape whose element count wraps around 2^63 could otherwise match small offsets
    // (e.g. [2^32, 2^32] with 0 bytes) and reach the tensor allocation.
    const uint64_t d = static_cast<uint64_t>(dim.get<int64_t>());
    if (d != 0 && numel > (uint64_t{1} << 62) / d) {
      return DataLossError(where + ": shape has more than 2^62 elements");
    }
    numel *= d;
  }
  const auto& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return DataLossError(where + ": data_offsets must be two non-negative integers");
  }
  info.begin = offsets[0].get<uint64_t>();
  info.end = offsets[1].get<uint64_t>();
  if (info.end < info.begin) {
    return DataLossError(where + ": data_offsets end before they begin");
  }
  if (info.end - info.begin != numel * static_cast<uint64_t>(dtype->bytes)) {
    return DataLossError(where + ": " + std::to_string(info.end - info.begin) +
                         " bytes do not hold shape " + ShapeToString(info.shape) + " of " +
                         info.dtype);
  }
  if (info.end > data_size) {
    return DataLossError(where + ": truncated data: needs bytes up to " + std::to_string(info.end) +
                         " of the data section, file has " + std::to_string(data_size));
  }
  return info;
}

}  // namespace

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// Read-only mapping of a whole file; unmapped on destruction.
class MappedFile {
 public:
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return NotFoundError(path + ": cannot open: " + std::strerror(errno));
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      std::string err = std::strerror(errno);
      ::close(fd);
      return DataLossError(path + ": cannot stat: " + err);
    }
    auto file = std::unique_ptr<MappedFile>(new MappedFile());
    file->size_ = static_cast<uint64_t>(st.st_size);
    if (file->size_ > 0) {
      void* addr = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (addr == MAP_FAILED) {
        std::string err = std::strerror(errno);
        ::close(fd);
        return DataLossError(path + ": cannot map: " + err);
      }
      file->data_ = static_cast<const uint8_t*>(addr);
    }
    ::close(fd);  // the mapping stays valid after the descriptor is closed
    return file;
  }

  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  if (!IsLittleEndianHost()) {
    return FailedPreconditionError(path + ": safetensors needs a little-endian host");
  }
  SafetensorsFile file;
  file.path_ = path;
  MULO_ASSIGN_OR_RETURN(file.mapping_, MappedFile::Open(path));
  const uint64_t size = file.mapping_->size();
  const uint8_t* bytes = file.mapping_->data();
  if (size < 8) {
    return DataLossError(path + ": file is " + std::to_string(size) +
                         " bytes, too short for the 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > size - 8) {
    return DataLossError(path + ": header length " + std::to_string(header_len) +
                         " is larger than the file (" + std::to_string(size) + " bytes)");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double ("1E5555") is out_of_range.
    return DataLossError(path + ": malformed JSON header: " + e.what());
  }
  if (!header.is_object()) {
    return DataLossError(path + ": malformed JSON header: not an object");
  }
  const uint64_t data_size = size - 8 - header_len;
  file.data_ = bytes + 8 + header_len;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") continue;
    const std::string where = path + ": key '" + key + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      return DataLossError(where + ": malformed entry (needs dtype, shape, data_offsets)");
    }
    MULO_ASSIGN_OR_RETURN(TensorInfo info, ParseEntry(where, entry, data_size));
    file.tensors_.emplace(key, std::move(info));
  }
  return file;
}

StatusOr<torch::Tensor> SafetensorsFile::Read(const std::string& key,
                                              torch::ScalarType float_dtype,
                                              const torch::Device& device) const {
  auto it = tensors_.find(key);
  if (it == tensors_.end()) {
    return NotFoundError(path_ + ": missing key '" + key + "'");
  }
  const TensorInfo& info = it->second;
  const DtypeSpec* dtype = FindDtype(info.dtype);
  return GuardTorch(path_ + ": key '" + key + "'", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    // from_blob does not own the bytes; clone() (or the dtype conversion) copies them out of
    // the mapping before it is released.
    auto view = torch::from_blob(const_cast<uint8_t*>(data_ + info.begin), info.shape,
                                 torch::TensorOptions().dtype(dtype->type));
    torch::Tensor out = dtype->is_float ? view.to(float_dtype) : view;
    return out.to(device, /*non_blocking=*/false, /*copy=*/true).contiguous();
  });
}

Status WriteSafetensors(const std::string& path,
                        const std::map<std::string, torch::Tensor>& tensors) {
  return GuardTorch("write " + path, [&]() -> Status {
    nlohmann::json header = nlohmann::json::object();
    std::vector<torch::Tensor> blobs;
    uint64_t offset = 0;
    for (const auto& [key, tensor] : tensors) {
      const DtypeSpec* dtype = FindDtype(tensor.scalar_type());
      if (dtype == nullptr) return InvalidArgumentError(path + ": key '" + key + "': dtype");
      torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
      const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype->bytes;
      header[key] = {{"dtype", dtype->name},
                     {"shape", t.sizes().vec()},
                     {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
      blobs.push_back(t);
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return NotFoundError(path + ": cannot open for writing");
    const uint64_t len = text.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : blobs) {
      out.write(static_cast<const char*>(t.data_ptr()),
                static_cast<std::streamsize>(t.numel() * t.element_size()));
    }
    if (!out) return DataLossError(path + ": write failed");
    return OkStatus();
  });
}

}  // namespace mulo::engine
