// The memory budget: MemAvailable bounded by cgroup v1/v2 limits (fake /proc and cgroup trees).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "trainers/io/available_memory.h"

using relpos::train::available_memory;
namespace fs = std::filesystem;

namespace {

struct FakeRoots {
  fs::path root;
  explicit FakeRoots(const std::string& name) : root(fs::temp_directory_path() / ("relpos_mem_" + name)) {
    fs::remove_all(root);
    fs::create_directories(root / "proc" / "self");
    fs::create_directories(root / "cg");
  }
  ~FakeRoots() { fs::remove_all(root); }
  void write(const fs::path& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  std::string proc() const { return (root / "proc").string(); }
  std::string cg() const { return (root / "cg").string(); }
};

constexpr int64_t GiB = int64_t(1) << 30;
const std::string kMeminfo16G = "MemTotal:       32000000 kB\nMemAvailable:   16777216 kB\n";  // 16 GiB

}  // namespace

TEST_CASE("available memory: MemAvailable alone when no cgroup limits", "[trainers][memory]") {
  FakeRoots r("plain");
  r.write("proc/meminfo", kMeminfo16G);
  r.write("proc/self/cgroup", "0::/user.slice\n");
  r.write("cg/user.slice/memory.max", "max\n");
  r.write("cg/user.slice/memory.current", "1000\n");
  auto m = available_memory(r.proc(), r.cg());
  CHECK(m.bytes == 16 * GiB);
  CHECK(m.source == "MemAvailable");
}

TEST_CASE("available memory: a cgroup v2 limit below MemAvailable bounds it, parents included", "[trainers][memory]") {
  FakeRoots r("v2");
  r.write("proc/meminfo", kMeminfo16G);
  r.write("proc/self/cgroup", "0::/job/step\n");
  r.write("cg/job/step/memory.max", std::to_string(8 * GiB) + "\n");
  r.write("cg/job/step/memory.current", std::to_string(1 * GiB) + "\n");
  SECTION("own limit") {
    auto m = available_memory(r.proc(), r.cg());
    CHECK(m.bytes == 7 * GiB);
    CHECK(m.source == "cgroup v2 /job/step/memory.max - memory.current");
  }
  SECTION("a tighter parent wins") {
    r.write("cg/job/memory.max", std::to_string(4 * GiB) + "\n");
    r.write("cg/job/memory.current", std::to_string(3 * GiB) + "\n");
    auto m = available_memory(r.proc(), r.cg());
    CHECK(m.bytes == 1 * GiB);
    CHECK(m.source == "cgroup v2 /job/memory.max - memory.current");
  }
  SECTION("usage at the limit leaves (almost) nothing, never 'unknown'") {
    r.write("cg/job/step/memory.current", std::to_string(9 * GiB) + "\n");
    CHECK(available_memory(r.proc(), r.cg()).bytes == 1);
  }
}

TEST_CASE("available memory: cgroup v1 memory controller, unlimited and namespaced paths", "[trainers][memory]") {
  FakeRoots r("v1");
  r.write("proc/meminfo", kMeminfo16G);
  r.write("proc/self/cgroup", "5:devices:/x\n4:memory:/docker/abc\n1:cpu,cpuacct:/\n0::/\n");
  SECTION("limit") {
    r.write("cg/memory/docker/abc/memory.limit_in_bytes", std::to_string(2 * GiB) + "\n");
    r.write("cg/memory/docker/abc/memory.usage_in_bytes", std::to_string(GiB / 2) + "\n");
    auto m = available_memory(r.proc(), r.cg());
    CHECK(m.bytes == 3 * GiB / 2);
    CHECK(m.source == "cgroup v1 /docker/abc/memory.limit_in_bytes - memory.usage_in_bytes");
  }
  SECTION("v1's 'no limit' (2^63 rounded to a page) is no limit") {
    r.write("cg/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
    r.write("cg/memory/docker/abc/memory.usage_in_bytes", "1958674432\n");
    CHECK(available_memory(r.proc(), r.cg()).source == "MemAvailable");
  }
  SECTION("a namespace hides the path: the mount's root files are ours") {
    r.write("cg/memory/memory.limit_in_bytes", std::to_string(GiB) + "\n");
    r.write("cg/memory/memory.usage_in_bytes", "0\n");
    auto m = available_memory(r.proc(), r.cg());
    CHECK(m.bytes == GiB);
    CHECK(m.source == "cgroup v1 /memory.limit_in_bytes - memory.usage_in_bytes");
  }
}

TEST_CASE("available memory: garbage files are ignored, not trusted", "[trainers][memory]") {
  FakeRoots r("garbage");
  r.write("proc/meminfo", "MemAvailable: lots kB\n");
  r.write("proc/self/cgroup", "0::/a\nnot a cgroup line\n");
  r.write("cg/a/memory.max", "-5\n");
  r.write("cg/a/memory.current", "12abc\n");
  auto m = available_memory(r.proc(), r.cg());
  CHECK(m.bytes == 0);  // unknown: no check is made
  CHECK(m.source.empty());
}

TEST_CASE("available memory: this machine's numbers are sane", "[trainers][memory]") {
  auto m = available_memory();
  CHECK(m.bytes >= 0);
  if (m.bytes > 0) CHECK(!m.source.empty());
}
