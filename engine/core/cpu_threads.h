// CPU thread settings for a decoding thread. LibTorch's own setting does not reach the BLAS:
// Debian's LibTorch calls OpenBLAS (pthreads build), whose pool keeps one spinning thread per
// core (sched_yield in a loop) once it has run, whatever at::set_num_threads says. On a
// small CPU that spinner takes a whole core from the RPC threads, other workers and clients.
#ifndef MULO_ENGINE_CORE_CPU_THREADS_H_
#define MULO_ENGINE_CORE_CPU_THREADS_H_

namespace mulo::engine {

// Sets LibTorch's intra-op threads for the calling thread (an OpenMP setting that new
// threads do not inherit) and, when OpenBLAS is loaded, its pool size (process-wide).
// `threads` < 1 is taken as 1.
void SetCpuThreads(int threads);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_CORE_CPU_THREADS_H_
