#include "engine/core/cpu_threads.h"

#include <dlfcn.h>

#include <algorithm>

#include <ATen/Parallel.h>
#include <torch/types.h>

namespace mulo::engine {

void SetCpuThreads(int threads) {
  threads = std::max(1, threads);
  at::set_num_threads(threads);
  // Looked up at run time: a LibTorch built on MKL or another BLAS has no such symbol, and
  // the engine must not link OpenBLAS itself.
  using SetBlasThreads = void (*)(int);
  if (auto set_blas = reinterpret_cast<SetBlasThreads>(
          dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas(threads);
  }
}

}  // namespace mulo::engine
