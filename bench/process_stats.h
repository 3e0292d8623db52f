// What the benches report about the process: seconds since a steady-clock instant, and the
// resident memory from /proc. Header-only, so tools/build_engine.sh builds the benches that use
// it without Bazel.
#ifndef MULO_BENCH_PROCESS_STATS_H_
#define MULO_BENCH_PROCESS_STATS_H_

#include <chrono>
#include <fstream>
#include <string>

namespace mulo::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// VmRSS in GiB from /proc, 0 when unreadable.
inline double RssGiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib = 0;
      status >> kib;
      return kib / (1024.0 * 1024.0);
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace mulo::bench

#endif  // MULO_BENCH_PROCESS_STATS_H_
