// The start-up advice about OpenBLAS's kernels: blas_kernels_probe run with OpenBLAS forced to
// its generic Prescott kernels (as on a CPU model it does not know) and, where the CPU has
// AVX-512, to the SkylakeX kernels the advice names.
#include <cstdio>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace {

// The probe's two lines (core, advice) under OPENBLAS_CORETYPE=`core`.
std::pair<std::string, std::string> Probe(const std::string& core) {
  const std::string command =
      "OPENBLAS_CORETYPE=" + core + " OPENBLAS_VERBOSE=0 tests/engine/core/blas_kernels_probe";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return {};
  std::string out;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  EXPECT_EQ(pclose(pipe), 0) << command;
  const size_t newline = out.find('\n');
  if (newline == std::string::npos) return {out, ""};
  std::string advice = out.substr(newline + 1);
  if (!advice.empty() && advice.back() == '\n') advice.pop_back();
  return {out.substr(0, newline), advice};
}

TEST(BlasKernelsTest, GenericKernelsOnAModernCpuGetAdvice) {
  const auto [core, advice] = Probe("Prescott");
  if (core.empty()) GTEST_SKIP() << "LibTorch's BLAS is not OpenBLAS";
  EXPECT_EQ(core, "Prescott");
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_NE(advice.find("generic Prescott kernels"), std::string::npos) << advice;
    EXPECT_NE(advice.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << advice;
  } else if (__builtin_cpu_supports("avx2")) {
    EXPECT_NE(advice.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << advice;
  } else {
    EXPECT_EQ(advice, "") << "no better kernels to advise on a CPU without AVX2";
  }
}

TEST(BlasKernelsTest, TheAdvisedKernelsGetNone) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 for the SkylakeX kernels";
  const auto [core, advice] = Probe("SkylakeX");
  if (core.empty()) GTEST_SKIP() << "LibTorch's BLAS is not OpenBLAS";
  EXPECT_EQ(core, "SkylakeX");
  EXPECT_EQ(advice, "");
}

}  // namespace
