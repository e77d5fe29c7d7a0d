#include "profile_writer.h"

#include <algorithm>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fds.h"
#include "rawlog.h"

namespace coz {

namespace {
// Length of the valid UTF-8 sequence starting at s[i], or 0.
size_t utf8_sequence(const std::string& s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; k++)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  if (n == 2 && c < 0xc2) return 0;  // overlong
  return n;
}
}  // namespace

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); i++) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // JSON text is UTF-8: a byte that is not part of a valid sequence (a
      // path in another encoding) becomes U+FFFD rather than break the file.
      size_t n = utf8_sequence(s, i);
      if (n) {
        out.append(s, i, n);
        i += n - 1;
      } else {
        out += "\xef\xbf\xbd";
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

std::string json_list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); i++) out += (i ? "," : "") + json_string(v[i]);
  return out + "]";
}

// Speedup as a fraction with two decimals: 35 -> "0.35", 100 -> "1.00".
std::string fraction(int percent) {
  char buf[16];
  snprintf(buf, sizeof buf, "%d.%02d", percent / 100, percent % 100);
  return buf;
}

// Legacy records cannot hold tabs or newlines in values.
std::string legacy_value(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c == '\t' || c == '\n') c = ' ';
  return out;
}

}  // namespace

ProfileWriter::~ProfileWriter() { close(); }

namespace {
std::string checkpoint_path(const std::string& profile) { return profile + ".checkpoint"; }
const char kTotalsHead[] = "{\"type\":\"totals\",";

// The whole content of a small file; false when it cannot be read.
bool read_whole(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return n == 0;
    }
    out->append(buf, static_cast<size_t>(n));
  }
}

// How many bytes the file size limit (ulimit -f) lets a write at the end
// of the regular file `fd` add; SIZE_MAX without a limit.
size_t room_under_size_limit(int fd) {
  rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return SIZE_MAX;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  return rl.rlim_cur > size ? static_cast<size_t>(rl.rlim_cur - size) : 0;
}

// Writes all of `text`, retrying short writes and interruptions; returns
// how much was written (less only on an error: a full disk, errno set).
// A write past the file size limit would send SIGXFSZ, whose default action
// kills the program (a runtime write at start runs on its main thread): a
// text the limit leaves no room for is not written at all, errno EFBIG.
// (Every write goes at the end: the profile is opened with O_APPEND, a
// checkpoint is new.)
size_t write_fully(int fd, const std::string& text) {
  if (room_under_size_limit(fd) < text.size()) {
    errno = EFBIG;
    return 0;
  }
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  return off;
}

// Writes `text` to `path` whole or not at all: to a file aside, renamed over it.
bool replace_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t off = write_fully(fd, text);
  bool ok = ::close(fd) == 0 && off == text.size() && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}
}  // namespace

bool ProfileWriter::open(const std::string& path, bool legacy, std::string* error) {
  std::lock_guard<std::mutex> g(mu_);
  legacy_ = legacy;
  fd_ = move_fd_high(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (fd_ < 0) {
    *error = "cannot open the profile '" + path + "' for writing: " + strerror(errno);
    return false;
  }
  path_ = path;
  owner_pid_ = static_cast<long>(getpid());
  // The last checkpoint of an earlier run that was killed: its totals
  // belong to that run, the profile's last so far, so they go in before
  // this run's startup record. (A record cut short is left where it is.)
  std::string left, left_path = checkpoint_path(path);
  if (!legacy_ && read_whole(left_path, &left) && !left.empty() && left.back() == '\n' &&
      left.rfind(kTotalsHead, 0) == 0) {
    emit_locked(left);
    ::unlink(left_path.c_str());
  }
  return true;
}

void ProfileWriter::close() {
  std::lock_guard<std::mutex> g(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ProfileWriter::emit(const std::string& record) {
  std::lock_guard<std::mutex> g(mu_);
  emit_locked(record);
}

void ProfileWriter::emit_locked(const std::string& record) {
  if (fd_ < 0 || at_size_limit_) return;
  // A record cut by an earlier failed write (disk full) left its line
  // open: end it first, so that this record starts a line of its own.
  const std::string& text = cut_ ? "\n" + record : record;
  // One write for the whole record; a short write (disk full) is retried
  // for the rest so that the record is never interleaved with another.
  size_t off = write_fully(fd_, text);
  cut_ = off < text.size() ? cut_ || off > 0 : false;
  if (off < text.size()) {
    // A record that the file size limit leaves no room for is not written,
    // and neither is any after it (a smaller one that fit would leave a gap
    // no reader could see): the profile ends at a record's end.
    at_size_limit_ = errno == EFBIG;
    say_write_failed();
  }
}

void ProfileWriter::say_write_failed() {
  if (write_failed_) return;
  // Nothing in the profile can say so: the user hears it now, once, or
  // would read a run cut short as one that sampled nothing. (A full disk
  // may have room again later: the records written then are kept.)
  write_failed_ = true;
  raw_log("error: writing the profile %s failed (%s): records are lost, this run's profile is incomplete",
          path_.c_str(), strerror(errno));
}

std::string ProfileWriter::format_startup(const StartupRecord& r) const {
  if (legacy_) return "startup\ttime=" + std::to_string(r.time_ns) + "\n";
  return "{\"type\":\"startup\",\"version\":1,\"time_ns\":" + std::to_string(r.time_ns) +
         ",\"pid\":" + std::to_string(r.pid) + ",\"argv0\":" + json_string(r.argv0) +
         ",\"build_id\":" + (r.build_id.empty() ? "null" : json_string(r.build_id)) +
         ",\"mode\":" + json_string(r.mode) + ",\"sample_period_ns\":" + std::to_string(r.sample_period_ns) +
         ",\"experiment_length_ns\":" + std::to_string(r.experiment_length_ns) +
         ",\"sampler\":" + json_string(r.sampler) +
         (r.cpus > 0 ? ",\"cpus\":" + std::to_string(r.cpus) : std::string()) +
         (r.cpus > 0 ? ",\"cpu_quota\":" + (r.cpu_quota > 0 ? std::to_string(r.cpu_quota) : std::string("null"))
                     : std::string()) +
         ",\"binary_scope\":" + json_list(r.binary_scope) +
         ",\"source_scope\":" + json_list(r.source_scope) +
         ",\"fixed_line\":" + (r.fixed_line.empty() ? "null" : json_string(r.fixed_line)) +
         ",\"fixed_speedup\":" + (r.fixed_speedup < 0 ? "null" : fraction(r.fixed_speedup)) +
         ",\"blocked_scope\":" + json_string(r.blocked_scope) + ",\"units\":" + json_list(r.units) +
         ",\"fixed_unit\":" + (r.fixed_unit.empty() ? "null" : json_string(r.fixed_unit)) + "}\n";
}

std::string ProfileWriter::format_experiment(const ExperimentRecord& r) const {
  std::string out;
  if (legacy_) {
    out = "experiment\tselected=" + legacy_value(r.selected) + "\tspeedup=" + fraction(r.speedup_percent) +
          "\tduration=" + std::to_string(r.duration_ns) + "\tselected-samples=" +
          std::to_string(r.selected_samples) + "\n";
    for (const PointDelta& p : r.progress) {
      if (p.latency) {
        out += "latency-point\tname=" + legacy_value(p.name) + "\tarrivals=" + std::to_string(p.arrivals) +
               "\tdepartures=" + std::to_string(p.departures) + "\tdifference=" + std::to_string(p.difference) +
               "\n";
      } else {
        out += "throughput-point\tname=" + legacy_value(p.name) + "\tdelta=" + std::to_string(p.delta) + "\n";
      }
    }
    return out;
  }
  out = "{\"type\":\"experiment\",\"selected\":" + json_string(r.selected) +
        (r.unit != "line" ? ",\"unit\":" + json_string(r.unit) : std::string()) +
        ",\"speedup\":" + fraction(r.speedup_percent) + ",\"duration_ns\":" + std::to_string(r.duration_ns) +
        ",\"wall_ns\":" + std::to_string(r.wall_ns) + ",\"delay_ns\":" + std::to_string(r.delay_ns) +
        ",\"selected_samples\":" + std::to_string(r.selected_samples) +
        ",\"selected_ns\":" + std::to_string(r.selected_ns) +
        (r.selected_blocked_ns ? ",\"selected_blocked_ns\":" + std::to_string(r.selected_blocked_ns) : std::string()) +
        ",\"partial\":" + (r.partial ? "true" : "false") +
        (r.stalled_ns ? ",\"stalled_ns\":" + std::to_string(r.stalled_ns) : std::string()) +
        (r.aligned.empty() ? std::string() : ",\"aligned\":" + json_string(r.aligned)) + ",\"progress\":[";
  for (size_t i = 0; i < r.progress.size(); i++) {
    const PointDelta& p = r.progress[i];
    out += i ? "," : "";
    if (p.latency) {
      out += "{\"name\":" + json_string(p.name) + ",\"kind\":\"latency\",\"arrivals\":" +
             std::to_string(p.arrivals) + ",\"departures\":" + std::to_string(p.departures) +
             ",\"difference\":" + std::to_string(p.difference) + "}";
    } else {
      out += "{\"name\":" + json_string(p.name) + ",\"kind\":\"throughput\",\"delta\":" + std::to_string(p.delta) +
             "}";
    }
  }
  return out + "]}\n";
}

namespace {
std::string json_counts(const Counts& c) {
  std::string out = "{";
  for (size_t i = 0; i < c.size(); i++) out += (i ? "," : "") + json_string(c[i].first) + ":" + std::to_string(c[i].second);
  return out + "}";
}
}  // namespace

std::string ProfileWriter::format_samples(const SamplesRecord& r) const {
  std::string out;
  if (legacy_) {
    for (auto& c : r.counts)
      out += "samples\tlocation=" + legacy_value(c.first) + "\tcount=" + std::to_string(c.second) + "\n";
    return out;
  }
  out = "{\"type\":\"samples\",\"counts\":" + json_counts(r.counts) + ",\"out_of_scope\":" + std::to_string(r.out_of_scope);
  if (!r.blocked.empty()) {
    out += ",\"blocked\":{";
    for (size_t i = 0; i < r.blocked.size(); i++)
      out += (i ? "," : "") + json_string(r.blocked[i].first) + ":" + json_counts(r.blocked[i].second);
    out += "}";
  }
  if (r.with_functions) out += ",\"functions\":" + json_counts(r.functions);
  if (r.with_callsites) out += ",\"callsites\":" + json_counts(r.callsites);
  return out + "}\n";
}

std::string ProfileWriter::format_runtime(uint64_t time_ns) const {
  if (legacy_) return "runtime\ttime=" + std::to_string(time_ns) + "\n";
  return "{\"type\":\"runtime\",\"time_ns\":" + std::to_string(time_ns) + "}\n";
}

std::string ProfileWriter::format_warning(const std::string& code, const std::string& message) const {
  if (legacy_) return "";  // upstream's format has no such record
  return "{\"type\":\"warning\",\"code\":" + json_string(code) + ",\"message\":" + json_string(message) + "}\n";
}

std::string ProfileWriter::format_shutdown(const ShutdownRecord& r) const {
  if (legacy_) return "shutdown\ttime=" + std::to_string(r.time_ns) + "\tsamples=" + std::to_string(r.samples) + "\n";
  return "{\"type\":\"shutdown\",\"time_ns\":" + std::to_string(r.time_ns) + ",\"reason\":" + json_string(r.reason) +
         ",\"samples\":" + std::to_string(r.samples) + ",\"lost_records\":" + std::to_string(r.lost_records) +
         ",\"dropped_samples\":" + std::to_string(r.dropped_samples) +
         ",\"skipped_records\":" + std::to_string(r.skipped_records) +
         ",\"truncated_stacks\":" + std::to_string(r.truncated_stacks) +
         ",\"experiments\":" + std::to_string(r.experiments) +
         ",\"period_turns\":" + std::to_string(r.period_turns) + "}\n";
}

namespace {
std::string opt_string(const std::string& s) { return s.empty() ? "null" : json_string(s); }
const char* const kWaitNames[6] = {"io", "lock", "sleep", "sync", "sched", "other"};
}  // namespace

// Upstream's legacy format has none of the records below: they are written
// in the JSON format only.
std::string ProfileWriter::format_locations(const std::vector<LocationRecord>& v) const {
  if (legacy_ || v.empty()) return "";
  std::string out = "{\"type\":\"locations\",\"locations\":[";
  for (size_t i = 0; i < v.size(); i++) {
    const LocationRecord& l = v[i];
    out += (i ? ",{\"id\":" : "{\"id\":") + std::to_string(l.id) + ",\"address\":" + std::to_string(l.address) +
           ",\"object\":" + json_string(l.object) + ",\"object_offset\":" + std::to_string(l.object_address) +
           ",\"build_id\":" + opt_string(l.build_id) + ",\"lines\":[";
    for (size_t k = 0; k < l.lines.size(); k++)
      out += (k ? ",{\"function\":" : "{\"function\":") + opt_string(l.lines[k].function) +
             ",\"file\":" + opt_string(l.lines[k].file) + ",\"line\":" + std::to_string(l.lines[k].line) + "}";
    out += "]}";
  }
  return out + "]}\n";
}

std::string ProfileWriter::format_stacks(const std::vector<StackRecord>& v) const {
  if (legacy_ || v.empty()) return "";
  std::string out = "{\"type\":\"stacks\",\"stacks\":[";
  for (size_t i = 0; i < v.size(); i++) {
    const StackRecord& s = v[i];
    out += (i ? ",{\"id\":" : "{\"id\":") + std::to_string(s.id) + ",\"locations\":[";
    for (size_t k = 0; k < s.locations.size(); k++) out += (k ? "," : "") + std::to_string(s.locations[k]);
    out += "],\"kind\":" + json_string(s.kind) + ",\"tid\":" + std::to_string(s.tid) +
           ",\"thread\":" + json_string(s.thread) + ",\"group\":" + json_string(s.group) + "}";
  }
  return out + "]}\n";
}

std::string ProfileWriter::format_stack_counts(const std::vector<StackCount>& v) const {
  if (legacy_ || v.empty()) return "";
  std::string out = "{\"type\":\"stack_counts\",\"counts\":[";
  for (size_t i = 0; i < v.size(); i++)
    out += (i ? ",[" : "[") + std::to_string(v[i].id) + "," + std::to_string(v[i].samples) + "," +
           std::to_string(v[i].ns) + "]";
  return out + "]}\n";
}

std::string ProfileWriter::format_thread(const ThreadRecord& r) const {
  if (legacy_) return "";
  std::string out = "{\"type\":\"thread\",\"tid\":" + std::to_string(r.tid) + ",\"thread\":" + json_string(r.thread) +
                    ",\"group\":" + json_string(r.group) + ",\"start_ns\":" + std::to_string(r.start_ns) +
                    ",\"end_ns\":" + std::to_string(r.end_ns) + ",\"cpu_ns\":" + std::to_string(r.cpu_ns) +
                    ",\"cpu_clock_ns\":" + std::to_string(r.cpu_clock_ns) +
                    ",\"wait_ns\":{";
  for (int i = 0; i < 6; i++) out += (i ? ",\"" : "\"") + std::string(kWaitNames[i]) + "\":" + std::to_string(r.wait_ns[i]);
  return out + "},\"paused_ns\":" + std::to_string(r.paused_ns) + ",\"paused_cpu_ns\":" + std::to_string(r.paused_cpu_ns) +
         ",\"preempt_credited_ns\":" + std::to_string(r.preempt_credited_ns) +
         (r.off_cpu_ns >= 0 ? ",\"off_cpu_ns\":" + std::to_string(r.off_cpu_ns) +
                                  ",\"call_cpu_ns\":" + std::to_string(r.call_cpu_ns)
                            : std::string()) +
         (r.sampled_alone ? ",\"sampled_alone\":true" : "") + "}\n";
}

std::string ProfileWriter::format_counters(const CountersRecord& r) const {
  if (legacy_) return "";
  std::string hw = "null";
  if (!r.hardware.empty()) {
    hw = "{";
    for (size_t i = 0; i < r.hardware.size(); i++)
      hw += (i ? "," : "") + json_string(r.hardware[i].first) + ":" + std::to_string(r.hardware[i].second);
    hw += "}";
  }
  return "{\"type\":\"counters\",\"task_clock_ns\":" + std::to_string(r.user_ns + r.system_ns) +
         ",\"user_ns\":" + std::to_string(r.user_ns) + ",\"system_ns\":" + std::to_string(r.system_ns) +
         ",\"context_switches\":{\"voluntary\":" + std::to_string(r.voluntary_switches) +
         ",\"involuntary\":" + std::to_string(r.involuntary_switches) + "},\"page_faults\":{\"minor\":" +
         std::to_string(r.minor_faults) + ",\"major\":" + std::to_string(r.major_faults) + "},\"migrations\":" +
         (r.migrations < 0 ? std::string("null") : std::to_string(r.migrations)) + ",\"children\":{\"cpu_ns\":" +
         std::to_string(r.children_cpu_ns) + ",\"profiled\":" + (r.children_profiled ? "true" : "false") +
         "},\"profiler_cpu_ns\":" + (r.profiler_cpu_ns < 0 ? std::string("null") : std::to_string(r.profiler_cpu_ns)) +
         ",\"hardware\":" + hw +
         ",\"hardware_unavailable\":" + opt_string(r.hardware_unavailable) + ",\"wall_ns\":" +
         std::to_string(r.wall_ns) + "}\n";
}

namespace {
std::string lock_counts(const LockSiteRecord& c) {
  return "\"acquisitions\":" + std::to_string(c.acquisitions) + ",\"acquisitions_sd\":" +
         std::to_string(c.acquisitions_sd) + ",\"contended\":" + std::to_string(c.contended) +
         ",\"wait_ns\":" + std::to_string(c.wait_ns) + ",\"hold_ns\":" + std::to_string(c.hold_ns) +
         ",\"hold_sd_ns\":" + std::to_string(c.hold_sd_ns) + ",\"hold_top_ns\":" + std::to_string(c.hold_top_ns) +
         ",\"trylocks\":" + std::to_string(c.trylocks) +
         ",\"trylock_failures\":" + std::to_string(c.trylock_failures);
}

std::string lock_list(const std::vector<LockRecord>& v, bool folded) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); i++) {
    const LockRecord& l = v[i];
    out += i ? ",{" : "{";
    if (folded) {
      out += "\"site\":" + opt_string(l.site) + ",\"kind\":" + json_string(l.kind) +
             ",\"objects\":" + std::to_string(l.id) + ",";
    } else {
      out += "\"id\":" + std::to_string(l.id) + ",\"kind\":" + json_string(l.kind) + ",\"address\":" +
             std::to_string(l.address) + ",\"site\":" + opt_string(l.site) + ",";
    }
    out += lock_counts(l.all) + ",\"threads\":" + std::to_string(l.threads) + ",\"sites\":[";
    for (size_t k = 0; k < l.sites.size(); k++)
      out += (k ? ",{\"site\":" : "{\"site\":") + json_string(l.sites[k].site) + "," + lock_counts(l.sites[k]) + "}";
    out += "]}";
  }
  return out + "]";
}
}  // namespace

std::string ProfileWriter::format_locks(const LocksRecord& r) const {
  if (legacy_ || (r.locks.empty() && r.folded.empty())) return "";
  return "{\"type\":\"locks\",\"elapsed_ns\":" + std::to_string(r.elapsed_ns) + ",\"locks\":" +
         lock_list(r.locks, false) + ",\"folded\":" + lock_list(r.folded, true) + "}\n";
}

void ProfileWriter::locks(const LocksRecord& r) {
  std::string text = format_locks(r);
  std::lock_guard<std::mutex> g(mu_);
  if (!totals_) return text.empty() ? void() : emit_locked(text);
  if (text.empty()) return;
  locks_text_ = std::move(text);
  totals_changed_ = true;
}
void ProfileWriter::locations(const std::vector<LocationRecord>& v) { emit_if(format_locations(v)); }
void ProfileWriter::stacks(const std::vector<StackRecord>& v) { emit_if(format_stacks(v)); }
void ProfileWriter::stack_counts(const std::vector<StackCount>& v) {
  std::lock_guard<std::mutex> g(mu_);
  if (!totals_) {
    std::string text = format_stack_counts(v);
    if (!text.empty()) emit_locked(text);
    return;
  }
  for (const StackCount& c : v) {
    auto& t = stack_totals_[c.id];
    t.first += c.samples;
    t.second += c.ns;
  }
  totals_changed_ = totals_changed_ || !v.empty();
}
void ProfileWriter::thread(const ThreadRecord& r) { emit_if(format_thread(r)); }
void ProfileWriter::counters(const CountersRecord& r) { emit_if(format_counters(r)); }
void ProfileWriter::emit_if(const std::string& record) {
  if (!record.empty()) emit(record);
}

void ProfileWriter::startup(const StartupRecord& r) { emit(format_startup(r)); }
void ProfileWriter::experiment(const ExperimentRecord& r) { emit(format_experiment(r)); }
void ProfileWriter::samples(const SamplesRecord& r) {
  std::lock_guard<std::mutex> g(mu_);
  if (legacy_) {
    // Upstream's samples records are a line's running count since the start,
    // each one replacing the line's last (its viewer and our parser keep the
    // last): the run's increments are summed here, not written as they come.
    SamplesRecord running;
    for (auto& c : r.counts) running.counts.emplace_back(c.first, line_counts_[c.first] += c.second);
    if (!running.counts.empty()) emit_locked(format_samples(running));
    return;
  }
  if (!totals_) {
    if (!r.empty()) emit_locked(format_samples(r));
    return;
  }
  for (auto& c : r.counts) line_counts_[c.first] += c.second;
  for (auto& c : r.functions) function_counts_[c.first] += c.second;
  for (auto& c : r.callsites) callsite_counts_[c.first] += c.second;
  for (auto& kind : r.blocked)
    for (auto& c : kind.second) blocked_counts_[kind.first][c.first] += c.second;
  out_of_scope_ += r.out_of_scope;
  with_functions_ = with_functions_ || r.with_functions;
  with_callsites_ = with_callsites_ || r.with_callsites;
  any_samples_ = any_samples_ || !r.empty();
  totals_changed_ = true;
}
void ProfileWriter::runtime(uint64_t time_ns) {
  std::lock_guard<std::mutex> g(mu_);
  if (!totals_) return emit_locked(format_runtime(time_ns));
  runtime_ns_ = std::max(runtime_ns_, time_ns);
  any_runtime_ = true;
  totals_changed_ = true;
}

void ProfileWriter::hold_totals() {
  std::lock_guard<std::mutex> g(mu_);
  totals_ = !legacy_;
}

std::string ProfileWriter::totals_record(bool final_totals) {
  auto counts = [](const std::map<std::string, uint64_t>& m) { return Counts(m.begin(), m.end()); };
  std::vector<std::string> parts;
  if (any_samples_) {
    SamplesRecord r;
    r.counts = counts(line_counts_);
    r.out_of_scope = out_of_scope_;
    for (auto& kind : blocked_counts_) r.blocked.emplace_back(kind.first, counts(kind.second));
    r.with_functions = with_functions_;
    r.with_callsites = with_callsites_;
    r.functions = counts(function_counts_);
    r.callsites = counts(callsite_counts_);
    parts.push_back(format_samples(r));
  }
  std::vector<StackCount> v;
  v.reserve(stack_totals_.size());
  for (auto& kv : stack_totals_) v.push_back({kv.first, kv.second.first, kv.second.second});
  parts.push_back(format_stack_counts(v));
  parts.push_back(locks_text_);
  if (any_runtime_) parts.push_back(format_runtime(runtime_ns_));
  std::string out = "{\"type\":\"totals\",\"seq\":" + std::to_string(++totals_seq_) +
                    ",\"pid\":" + std::to_string(owner_pid_) + ",\"final\":" + (final_totals ? "true" : "false") +
                    ",\"records\":[";
  bool first = true;
  for (std::string& p : parts) {
    if (p.empty()) continue;
    p.pop_back();  // its newline
    out += (first ? "" : ",") + p;
    first = false;
  }
  return out + "]}\n";
}

void ProfileWriter::checkpoint() {
  std::lock_guard<std::mutex> g(mu_);
  if (!totals_ || fd_ < 0 || !totals_changed_ || static_cast<long>(getpid()) != owner_pid_) return;
  totals_changed_ = false;
  replace_file(checkpoint_path(path_), totals_record(false));
}
void ProfileWriter::warning(const std::string& code, const std::string& message) {
  std::string rec = format_warning(code, message);
  if (!rec.empty()) emit(rec);
}
void ProfileWriter::shutdown(const ShutdownRecord& r) {
  std::lock_guard<std::mutex> g(mu_);
  if (totals_ && fd_ >= 0 && static_cast<long>(getpid()) == owner_pid_) {
    // In the profile first, then the checkpoint goes: a reader between the
    // two takes the higher `seq`, this one.
    emit_locked(totals_record(true));
    ::unlink(checkpoint_path(path_).c_str());
    totals_ = false;
  }
  emit_locked(format_shutdown(r));
}

}  // namespace coz
