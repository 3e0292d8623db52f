#include "engine/core/device_stream.h"

#ifdef MULO_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace mulo::engine {

void UseOwnDeviceStream(const torch::Device& device) {
#ifdef MULO_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(false, device.index()));
  }
#else
  (void)device;
#endif
}

void WaitForThisThread(const torch::Device& device) {
#ifdef MULO_WITH_CUDA
  if (device.is_cuda()) c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
#else
  (void)device;
#endif
}

}  // namespace mulo::engine
