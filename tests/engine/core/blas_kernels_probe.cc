// Prints the OpenBLAS core LibTorch's GEMMs run on, then BlasKernelAdvice(), one per line.
#include <torch/types.h>

#include <cstdio>

#include "engine/core/blas_kernels.h"

int main() {
  // A GEMM, so that the BLAS is certainly loaded and initialised.
  const torch::Tensor product = torch::ones({4, 4}).mm(torch::ones({4, 4}));
  if (product[0][0].item<float>() != 4.0f) return 1;
  std::printf("%s\n%s\n", mulo::engine::BlasCoreName().c_str(),
              mulo::engine::BlasKernelAdvice().c_str());
  return 0;
}
