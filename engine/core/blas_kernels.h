// Which OpenBLAS kernels the CPU path runs, and whether they suit the CPU.
//
// Debian's LibTorch does its float32 GEMMs in OpenBLAS, which picks its kernels once, when it
// loads, from the CPU's family and model numbers. A model it does not know (common on virtual
// machines, whose CPU may report itself as "Intel(R) Xeon(R) Processor") gets the generic SSE3
// "Prescott" kernels even on a CPU with AVX-512. On such a machine (this project's CI) the
// SkylakeX kernels decoded ar 1.6-2.2x faster alone and 1.2-1.9x faster at concurrency 8, same
// tokens (docs/benchmarks.md). The choice cannot change after load: OPENBLAS_CORETYPE must be
// set before the process starts.
#ifndef MULO_ENGINE_CORE_BLAS_KERNELS_H_
#define MULO_ENGINE_CORE_BLAS_KERNELS_H_

#include <string>

namespace mulo::engine {

// OpenBLAS's name for the kernels it runs ("SkylakeX", "Prescott", ...); empty when the BLAS
// is not OpenBLAS (a LibTorch built on MKL).
std::string BlasCoreName();

// Empty when the kernels suit the CPU; otherwise one line saying which kernels run, what the
// CPU could run, and the OPENBLAS_CORETYPE value that selects them, for the start-up log.
std::string BlasKernelAdvice();

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_BLAS_KERNELS_H_
