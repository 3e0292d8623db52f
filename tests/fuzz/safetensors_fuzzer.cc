// Fuzzes the safetensors reader: arbitrary bytes as a file (an anonymous memory file, opened
// by its /proc path as a checkpoint would be) must be refused with an error or read, never
// crash, hang or read outside the mapping.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "engine/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0) return 0;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  auto file = mulo::engine::SafetensorsFile::Open("/proc/self/fd/" + std::to_string(fd));
  if (file.ok()) {
    for (const auto& [key, info] : file->tensors()) {
      // Reading copies the bytes out; large shapes were refused when the header was checked.
      (void)file->Read(key, torch::kFloat32, torch::Device(torch::kCPU));
    }
  }
  close(fd);
  return 0;
}
