// Which CUDA stream a thread's work goes to. By default every thread of a process launches on
// the device's legacy default stream, so the server's workers would queue behind one another on
// the GPU; and a device-wide synchronisation, the only way to wait for that shared stream, fails
// while another worker captures a CUDA graph (docs/gpu.md). So each worker takes a stream of its
// own and waits only for it.
#ifndef MULO_ENGINE_CORE_DEVICE_STREAM_H_
#define MULO_ENGINE_CORE_DEVICE_STREAM_H_

#include <torch/types.h>

namespace mulo::engine {

// Makes a stream of its own the calling thread's current stream on `device` (a CUDA device in
// a CUDA build); anything else is left as it is. The streams come from LibTorch's pool of 32
// low-priority streams per device, round robin: up to 32 threads get one each (the server
// limits CUDA workers to that), and CUDA graph captures of threads on the default stream take
// theirs from the high-priority pool instead (forward_graphs.cc).
void UseOwnDeviceStream(const torch::Device& device);

// Waits until the calling thread's work on `device` is done (its current stream only); returns
// at once on the CPU.
void WaitForThisThread(const torch::Device& device);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_DEVICE_STREAM_H_
