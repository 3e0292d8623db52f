// The median of a sample (the mean of the middle two when its size is even; 0 when empty), for
// the benchmarks that report paired latencies.
#ifndef MULO_BENCH_MEDIAN_H_
#define MULO_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace mulo::bench {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace mulo::bench

#endif  // MULO_BENCH_MEDIAN_H_
