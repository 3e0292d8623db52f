// Standard process metrics, read from procfs at scrape time with the names, types and help
// texts of the official Prometheus client libraries (Go, Python), so existing dashboards
// and alerts work unchanged:
//   process_cpu_seconds_total      counter  user + system CPU time
//   process_resident_memory_bytes  gauge    resident set size
//   process_virtual_memory_bytes   gauge    virtual memory size
//   process_start_time_seconds     gauge    start time, seconds since the Unix epoch
//   process_open_fds               gauge    open file descriptors
//   process_max_fds                gauge    soft limit on open file descriptors (+Inf when
//                                           unlimited)
// A metric whose source cannot be read or parsed (e.g. no procfs) is left out of the
// scrape rather than reported as a wrong value.
#ifndef MULO_SERVER_METRICS_PROCESS_COLLECTOR_H_
#define MULO_SERVER_METRICS_PROCESS_COLLECTOR_H_

#include <string>
#include <vector>

#include "server/metrics/collector.h"

namespace mulo::server::metrics {

class ProcessCollector : public Collector {
 public:
  // Reads <proc_root>/self/{stat,fd,limits} and <proc_root>/stat (boot time). Tests point
  // `proc_root` at a fake tree to check exact values.
  explicit ProcessCollector(std::string proc_root = "/proc");

  std::vector<std::string> Describe() const override;
  std::vector<FamilySnapshot> Collect() const override;

 private:
  const std::string proc_root_;
  // From sysconf, fixed for the life of the process: units of /proc/self/stat.
  const double ticks_per_second_;
  const double page_size_bytes_;
};

}  // namespace mulo::server::metrics

#endif  // MULO_SERVER_METRICS_PROCESS_COLLECTOR_H_
