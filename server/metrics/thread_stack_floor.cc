// Debian's civetweb is built with a 100 KiB thread stack (CIVETWEB_THREAD_STACK_SIZE), and
// glibc carves a thread's static TLS out of its stack. mulo_server links LibTorch, OpenBLAS
// and glog, whose static TLS alone is about 106 KiB, so every civetweb thread failed to start
// ("Cannot create threads"). civetweb has no run-time option for the stack size, so this
// definition interposes pthread_attr_setstacksize for the whole process and raises requests
// below a floor to it; larger requests pass through unchanged. It is linked only into
// binaries that start the metrics HTTP server.
#include <dlfcn.h>
#include <pthread.h>

#include <cstddef>

namespace {

constexpr size_t kStackFloorBytes = size_t{2} << 20;  // glibc's usual default

using SetStackSize = int (*)(pthread_attr_t*, size_t);

SetStackSize RealSetStackSize() {
  static const SetStackSize real =
      reinterpret_cast<SetStackSize>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return real;
}

}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t stacksize) {
  const SetStackSize real = RealSetStackSize();
  if (real == nullptr) return 0;  // keep the attribute's default size
  return real(attr, stacksize < kStackFloorBytes ? kStackFloorBytes : stacksize);
}
