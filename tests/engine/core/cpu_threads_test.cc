// SetCpuThreads reaches both LibTorch (per calling thread) and OpenBLAS (when loaded), the
// second of which at::set_num_threads leaves alone.
#include "engine/core/cpu_threads.h"

#include <dlfcn.h>

#include <thread>

#include <ATen/Parallel.h>
#include <torch/types.h>

#include "gtest/gtest.h"

namespace mulo::engine {
namespace {

int BlasThreadsOrMinusOne() {
  using GetBlasThreads = int (*)();
  auto get = reinterpret_cast<GetBlasThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get ? get() : -1;
}

TEST(CpuThreadsTest, SetsTorchAndBlasThreadsOnTheCallingThread) {
  // A matmul makes sure the BLAS is loaded and has started its pool.
  auto a = torch::randn({64, 64});
  (void)torch::mm(a, a);
  int torch_threads = 0;
  int blas_threads = 0;
  std::thread worker([&] {
    SetCpuThreads(1);
    torch_threads = at::get_num_threads();
    blas_threads = BlasThreadsOrMinusOne();
  });
  worker.join();
  EXPECT_EQ(torch_threads, 1);
  if (blas_threads != -1) EXPECT_EQ(blas_threads, 1);  // -1: this LibTorch has no OpenBLAS

  SetCpuThreads(0);  // below 1 means 1
  EXPECT_EQ(at::get_num_threads(), 1);
}

}  // namespace
}  // namespace mulo::engine
