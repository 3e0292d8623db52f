#include "engine/core/blas_kernels.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <string>

namespace mulo::engine {
namespace {

// OpenBLAS's x86 cores older than AVX: what it falls back to for a CPU model it does not know.
bool IsPreAvxCore(const std::string& core) {
  static constexpr std::array<const char*, 11> kPreAvx = {
      "Unknown", "Katmai",  "Coppermine", "Northwood", "Prescott", "Banias",
      "Atom",    "Core2",   "Penryn",     "Dunnington", "Nehalem"};
  return std::any_of(kPreAvx.begin(), kPreAvx.end(),
                     [&](const char* name) { return core == name; });
}

}  // namespace

std::string BlasCoreName() {
  // Looked up at run time, as in cpu_threads.cc: the engine does not link OpenBLAS itself.
  using CoreName = char* (*)();
  auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr) return "";
  const char* name = core_name();
  return name == nullptr ? "" : name;
}

std::string BlasKernelAdvice() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  const std::string core = BlasCoreName();
  if (core.empty() || !IsPreAvxCore(core)) return "";
  // SkylakeX was measured (docs/benchmarks.md); Haswell is OpenBLAS's AVX2 choice, offered
  // for CPUs without AVX-512 but not measured here.
  const char* better = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                         : nullptr;
  if (better == nullptr) return "";
  return "OpenBLAS runs its generic " + core + " kernels (it did not recognise this CPU's " +
         "model) on a CPU with " + (std::string(better) == "SkylakeX" ? "AVX-512" : "AVX2") +
         ": start with OPENBLAS_CORETYPE=" + better +
         " for faster CPU decoding (docs/deployment.md)";
#else
  return "";
#endif
}

}  // namespace mulo::engine
