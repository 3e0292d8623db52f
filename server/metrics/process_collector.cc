#include "server/metrics/process_collector.h"

#include <dirent.h>
#include <unistd.h>

#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "server/text_file.h"

namespace mulo::server::metrics {
namespace {

constexpr char kCpu[] = "process_cpu_seconds_total";
constexpr char kResident[] = "process_resident_memory_bytes";
constexpr char kVirtual[] = "process_virtual_memory_bytes";
constexpr char kStartTime[] = "process_start_time_seconds";
constexpr char kOpenFds[] = "process_open_fds";
constexpr char kMaxFds[] = "process_max_fds";

// The fields of /proc/<pid>/stat after the command name, so that fields()[0] is field 3
// ("state") of proc(5). The name is in parentheses and may itself contain spaces and
// parentheses, hence the search for the last ')'.
std::vector<std::string> StatFieldsAfterComm(const std::string& stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return {};
  return absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
}

// Field `n` (1-based, as numbered in proc(5)) of /proc/<pid>/stat.
std::optional<double> StatField(const std::vector<std::string>& after_comm, int n) {
  const size_t index = n - 3;
  double value = 0;
  if (index >= after_comm.size() ||
      !absl::SimpleAtod(absl::StripAsciiWhitespace(after_comm[index]), &value)) {
    return std::nullopt;
  }
  return value;
}

// "btime <seconds>" from /proc/stat: boot time, seconds since the epoch.
std::optional<double> BootTime(const std::string& proc_root) {
  absl::StatusOr<std::string> stat = ReadTextFile(proc_root + "/stat");
  if (!stat.ok()) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      double value = 0;
      if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &value)) return value;
    }
  }
  return std::nullopt;
}

std::optional<double> OpenFds(const std::string& proc_root) {
  DIR* dir = opendir((proc_root + "/self/fd").c_str());
  if (dir == nullptr) return std::nullopt;
  // Counts the descriptor of `dir` itself too, as the Go client does.
  double count = 0;
  while (const dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    if (name != "." && name != "..") ++count;
  }
  closedir(dir);
  return count;
}

// The soft limit from the "Max open files" line of /proc/self/limits.
std::optional<double> MaxFds(const std::string& proc_root) {
  absl::StatusOr<std::string> limits = ReadTextFile(proc_root + "/self/limits");
  if (!limits.ok()) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*limits, '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.empty()) return std::nullopt;
    if (fields[0] == "unlimited") return INFINITY;
    double value = 0;
    if (absl::SimpleAtod(fields[0], &value)) return value;
    return std::nullopt;
  }
  return std::nullopt;
}

void AddFamily(const char* name, const char* help, MetricType type,
               std::optional<double> value, std::vector<FamilySnapshot>* out) {
  if (!value) return;
  FamilySnapshot family;
  family.name = name;
  family.help = help;
  family.type = type;
  family.metrics.emplace_back();
  family.metrics.back().value = *value;
  out->push_back(std::move(family));
}

}  // namespace

ProcessCollector::ProcessCollector(std::string proc_root)
    : proc_root_(std::move(proc_root)),
      ticks_per_second_(static_cast<double>(sysconf(_SC_CLK_TCK))),
      page_size_bytes_(static_cast<double>(sysconf(_SC_PAGESIZE))) {}

std::vector<std::string> ProcessCollector::Describe() const {
  return {kCpu, kResident, kVirtual, kStartTime, kOpenFds, kMaxFds};
}

std::vector<FamilySnapshot> ProcessCollector::Collect() const {
  std::optional<double> cpu, resident, virtual_bytes, start_time;
  if (absl::StatusOr<std::string> stat = ReadTextFile(proc_root_ + "/self/stat"); stat.ok()) {
    const std::vector<std::string> fields = StatFieldsAfterComm(*stat);
    // proc(5): 14 utime, 15 stime, 22 starttime (clock ticks; starttime since boot),
    // 23 vsize (bytes), 24 rss (pages).
    const std::optional<double> utime = StatField(fields, 14);
    const std::optional<double> stime = StatField(fields, 15);
    if (utime && stime) cpu = (*utime + *stime) / ticks_per_second_;
    if (std::optional<double> vsize = StatField(fields, 23)) virtual_bytes = *vsize;
    if (std::optional<double> rss = StatField(fields, 24)) resident = *rss * page_size_bytes_;
    const std::optional<double> start_ticks = StatField(fields, 22);
    const std::optional<double> boot_time = BootTime(proc_root_);
    if (start_ticks && boot_time) start_time = *boot_time + *start_ticks / ticks_per_second_;
  }

  std::vector<FamilySnapshot> families;
  AddFamily(kCpu, "Total user and system CPU time spent in seconds.", MetricType::kCounter,
            cpu, &families);
  AddFamily(kResident, "Resident memory size in bytes.", MetricType::kGauge, resident,
            &families);
  AddFamily(kVirtual, "Virtual memory size in bytes.", MetricType::kGauge, virtual_bytes,
            &families);
  AddFamily(kStartTime, "Start time of the process since unix epoch in seconds.",
            MetricType::kGauge, start_time, &families);
  AddFamily(kOpenFds, "Number of open file descriptors.", MetricType::kGauge,
            OpenFds(proc_root_), &families);
  AddFamily(kMaxFds, "Maximum number of open file descriptors.", MetricType::kGauge,
            MaxFds(proc_root_), &families);
  return families;
}

}  // namespace mulo::server::metrics
