// trainers/io/available_memory.cpp — see available_memory.h.
#include "trainers/io/available_memory.h"

#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>
#include <sstream>
#include <vector>

namespace relpos::train {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kUnlimited = int64_t(1) << 60;  // v1 writes "no limit" as ~2^63 rounded to a page

// The first whitespace-separated token of a file as a byte count; "max" (v2's "no limit") and
// anything unreadable or out of range -> nullopt.
std::optional<int64_t> read_bytes(const fs::path& p) {
  std::ifstream f(p);
  std::string tok;
  if (!(f >> tok) || tok == "max") return std::nullopt;
  try {
    size_t used = 0;
    const long long v = std::stoll(tok, &used);
    if (used != tok.size() || v < 0 || v >= kUnlimited) return std::nullopt;
    return int64_t(v);
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<int64_t> meminfo_available(const fs::path& meminfo) {
  std::ifstream f(meminfo);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream ss(line.substr(13));
    int64_t kb = 0;
    if (ss >> kb && kb > 0 && kb < (int64_t(1) << 50)) return kb * 1024;
  }
  return std::nullopt;
}

// A "Name:   N kB" line of /proc/self/status, in bytes.
std::optional<int64_t> proc_status_bytes(const fs::path& status, const char* field) {
  std::ifstream f(status);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) != 0) continue;
    std::istringstream ss(line.substr(std::strlen(field)));
    int64_t kb = 0;
    if (ss >> kb && kb >= 0 && kb < (int64_t(1) << 50)) return kb * 1024;
  }
  return std::nullopt;
}

struct Headroom {
  int64_t bytes;
  std::string source;
};

// min over `dir` and its ancestors up to `base` of (limit − usage).
void walk(const fs::path& base, const std::string& cg_path, const char* limit_file, const char* usage_file,
          const std::string& label, std::optional<Headroom>& best) {
  fs::path rel = fs::path(cg_path).relative_path();
  std::error_code ec;
  if (!fs::is_directory(base / rel, ec)) rel.clear();  // namespaced: our cgroup is the mount's root
  for (;;) {
    const fs::path dir = base / rel;
    const auto limit = read_bytes(dir / limit_file);
    const auto usage = read_bytes(dir / usage_file);
    if (limit && usage) {
      const int64_t room = *limit > *usage ? *limit - *usage : 0;
      if (!best || room < best->bytes)
        best = Headroom{room, fmt::format("{} /{}{}{} - {}", label, rel.generic_string(), rel.empty() ? "" : "/",
                                         limit_file, usage_file)};
    }
    if (rel.empty()) break;
    rel = rel.parent_path();
    if (rel == rel.root_path()) rel.clear();
  }
}

}  // namespace

AvailableMemory available_memory(const std::string& proc_root, const std::string& cgroup_root) {
  AvailableMemory out;
  if (auto m = meminfo_available(fs::path(proc_root) / "meminfo")) out = {*m, "MemAvailable"};

  std::optional<Headroom> cg;
  std::ifstream f(fs::path(proc_root) / "self" / "cgroup");
  std::string line;
  while (std::getline(f, line)) {
    // "hierarchy-id:controllers:path"; v2 is "0::path"
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (id == "0" && ctrl.empty()) {
      for (const char* sub : {"", "unified"})
        walk(fs::path(cgroup_root) / sub, path, "memory.max", "memory.current", "cgroup v2", cg);
    } else {
      std::istringstream cs(ctrl);
      std::string c;
      while (std::getline(cs, c, ','))
        if (c == "memory")
          walk(fs::path(cgroup_root) / "memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes", "cgroup v1",
               cg);
    }
  }
  if (cg && (out.bytes == 0 || cg->bytes < out.bytes)) out = {std::max<int64_t>(cg->bytes, 1), cg->source};
  // The process's own limits (ulimit -v / -d, a batch scheduler's address-space limit): what is
  // left of each is its limit minus what the process already maps (VmSize) or uses for data (VmData).
  for (const auto& [resource, label, field] : {std::tuple{RLIMIT_AS, "RLIMIT_AS (ulimit -v)", "VmSize:"},
                                               std::tuple{RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)", "VmData:"}}) {
    rlimit rl{};
    if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= rlim_t(kUnlimited)) continue;
    const int64_t used = proc_status_bytes(fs::path(proc_root) / "self" / "status", field).value_or(0);
    const int64_t room = std::max<int64_t>(int64_t(rl.rlim_cur) - used, 1);
    if (out.bytes == 0 || room < out.bytes)
      out = {room, fmt::format("{} {} minus {} in use ({})", label, int64_t(rl.rlim_cur), used,
                               std::string(field, std::strlen(field) - 1))};
  }
  return out;
}

}  // namespace relpos::train
