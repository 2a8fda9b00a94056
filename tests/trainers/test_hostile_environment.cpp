// Hostile environments and messages: every RELPOS_* switch with a bad value in every verb,
// test hooks outside their configuration, an address-space limit (ulimit -v), output to a full
// device, oversized values and control bytes in messages. Each ends in a clear error (or a
// result) with the documented exit status — never a signal, a hang or "internal error".
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>

#include "../trainers/hostile_helpers.h"
#include "core/cuda_runtime.h"
#include "core/env.h"
#include "nn/positional/params.h"
#include "trainers/io/available_memory.h"
#include "../helpers.h"

using namespace relpos;
using namespace relpos::hostile;
using Catch::Contains;

namespace {

// A tiny run to evaluate (trained once per process).
const std::string& tiny_run() {
  static const std::string d = [] {
    const std::string dir = tmp("env_run");
    fs::create_directories(dir + "_cfg");
    write(dir + "_cfg/tiny.yaml", tiny_yaml(dir, 3));
    Run r = cli("train " + dir + "_cfg/tiny.yaml");
    INFO(r.out);
    REQUIRE(r.code == 0);
    return dir;
  }();
  return d;
}

// A value that the switch's table row refuses.
std::string bad_value(const EnvSwitch& s) {
  for (const char* v : {"bogus", "2", "hang:x:1"})
    if (!s.check(v).empty()) return v;
  return "";
}

}  // namespace

TEST_CASE("hostile environment: a bad value of any switch is the same clean error in every verb", "[hostile][env]") {
  const std::string run = tiny_run();
  fs::create_directories(run + "_cfg");
  const std::string cfg = run + "_cfg/tiny.yaml";
  const std::vector<std::string> verbs = {
      "info", "validate " + cfg, "train " + cfg + " --set output.dir=" + run + "_again",
      "train " + cfg + " --set output.dir=" + run + "_bf16 --set train.precision=bf16", "eval " + run, "list"};
  int tested = 0;
  for (const EnvSwitch& s : env_switches()) {
    const std::string v = bad_value(s);
    if (v.empty()) continue;  // a path or a program: anything goes
    for (const auto& verb : verbs) {
      Run e = test::shell_run("env " + std::string(s.name) + "=" + v + " timeout -s KILL 60 " +
                              test::shell_quote(RELPOS_CLI_PATH) + " " + verb);
      INFO(s.name << "=" << v << " relpos " << verb << "\n" << e.out);
      CHECK(e.code == 2);
      CHECK_THAT(e.out, Contains(std::string("environment ") + s.name + "=" + v + ": expected"));
      CHECK_THAT(e.out, !Contains("internal error") && !Contains("terminate"));
      ++tested;
    }
  }
  REQUIRE(tested >= 6 * 6);
}

TEST_CASE("hostile environment: every RELPOS_ variable the sources read is a documented row of the table",
          "[hostile][env]") {
  std::set<std::string> rows;
  for (const EnvSwitch& s : env_switches()) rows.insert(s.name);
  const std::regex getenv_re(R"re(getenv\("(RELPOS_[A-Z0-9_]+)"\))re"), value_re(R"re(env_value\("(RELPOS_[A-Z0-9_]+)"\))re"),
      switch_re(R"re(env_switch\("(RELPOS_[A-Z0-9_]+)"\))re");
  std::set<std::string> read;
  std::vector<std::string> tops(test::kLayers.begin(), test::kLayers.end());
  for (const char* more : {"tests", "bench", "tools"}) tops.push_back(more);
  for (const std::string& top : tops) {
    const fs::path root = fs::path(RELPOS_SOURCE_DIR) / top;
    if (!fs::exists(root)) continue;
    for (const auto& f : fs::recursive_directory_iterator(root)) {
      const std::string ext = f.path().extension().string();
      if (!f.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu")) continue;
      if (f.path().filename() == "test_hostile_environment.cpp") continue;
      const std::string text = slurp(f.path().string());
      for (const std::regex* re : {&getenv_re, &value_re, &switch_re})
        for (std::sregex_iterator it(text.begin(), text.end(), *re), end; it != end; ++it) {
          INFO(f.path().string() << " reads " << (*it)[1]);
          CHECK(rows.count((*it)[1]) == 1);
          read.insert((*it)[1]);
        }
    }
  }
  for (const auto& r : rows) {
    INFO(r << " is in the table but nothing reads it");
    CHECK(read.count(r) == 1);
  }
  // docs/config.md holds the table as `relpos list --env --markdown` prints it.
  const std::string doc = slurp(RELPOS_SOURCE_DIR "/docs/config.md");
  REQUIRE_THAT(doc, Contains("<!-- begin: relpos list --env --markdown -->\n" + env_switches_markdown() +
                             "<!-- end: env -->"));
  // relpos info lists every switch and its value.
  Run r = test::shell_run("env RELPOS_BLAS_CORE=keep timeout -s KILL 60 " + test::shell_quote(RELPOS_CLI_PATH) +
                          " info");
  INFO(r.out);
  REQUIRE(r.code == 0);
  for (const auto& name : rows) CHECK_THAT(r.out, Contains(name));
  CHECK_THAT(r.out, Contains("RELPOS_BLAS_CORE           keep"));
}

TEST_CASE("hostile environment: the data-parallel fault hook refuses a single-process run", "[hostile][env]") {
  const std::string run = tiny_run();
  for (const char* f : {"hang:0:2", "exit:0:2", "diverge:0:2", "stall:0:2"}) {
    const std::string d = tmp(std::string("fault_") + f[0]);
    Run r = test::shell_run(std::string("env RELPOS_FAULT=") + f + " timeout -s KILL 60 " +
                            test::shell_quote(RELPOS_CLI_PATH) + " train " + run + "_cfg/tiny.yaml --set output.dir=" + d);
    INFO(f << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("RELPOS_FAULT") && Contains("data-parallel"));
    CHECK(!fs::exists(d + "/metrics.jsonl"));  // refused before anything ran
  }
}

TEST_CASE("hostile environment: every command under a 256 MiB address-space limit ends within 30 s with a result or a named error",
          "[hostile][env][memory]") {
  if (kAddressSanitizer) {
    SUCCEED("no address-space limit under AddressSanitizer");
    return;
  }
  const std::string run = tiny_run();
  const std::string cfg = run + "_cfg/tiny.yaml";
  const std::string q = RELPOS_SOURCE_DIR "/configs/quickstart.yaml";
  const std::vector<std::string> cmds = {"info",
                                         "list",
                                         "validate " + q,
                                         "validate " + cfg,
                                         "train " + cfg + " --set output.dir=" + tmp("as_train"),
                                         "train " + q + " --set output.dir=" + tmp("as_quick"),
                                         "eval " + run,
                                         "inspect " + run,
                                         "sample " + run + " --tokens 4",
                                         "bias --type t5 --lq 8 --lk 8"};
  for (const auto& c : cmds) {
    Run r = test::shell_run("ulimit -v 262144; timeout -s KILL 30 " + test::shell_quote(RELPOS_CLI_PATH) + " " + c);
    INFO("ulimit -v 262144; relpos " << c << "\n" << r.out);
    CHECK(r.code >= 0);   // no signal (137: the 30 s guard)
    CHECK(r.code != 137);
    CHECK_THAT(r.out, !Contains("internal error") && !Contains("terminate"));
    if (r.code != 0) CHECK_THAT(r.out, Contains("error:"));
  }
  // A run whose metrics.jsonl is far larger than what is left under the limit: --resume
  // refuses to read it, naming the file and the budget (not an out-of-memory death).
  const std::string big = tmp("as_big_metrics");
  fs::copy(run, big, fs::copy_options::recursive);
  {
    std::ofstream m(big + "/metrics.jsonl", std::ios::app);
    const std::string row = "{\"step\": 1, \"loss\": 2.0, \"note\": \"" + std::string(200, 'x') + "\"}\n";
    for (int i = 0; i < 200000; ++i) m << row;  // 40 MB
  }
  Run res = test::shell_run("ulimit -v 262144; timeout -s KILL 30 " + test::shell_quote(RELPOS_CLI_PATH) + " train " +
                            cfg + " --resume " + big + " --set train.steps=6");
  INFO(res.out);
  CHECK(res.code == 1);
  CHECK_THAT(res.out, Contains("metrics.jsonl") && Contains("bytes of memory") && Contains("RLIMIT_AS"));
  // A model whose estimate exceeds the limit is refused by validate, naming the limit.
  Run v = test::shell_run("ulimit -v 262144; timeout -s KILL 30 " + test::shell_quote(RELPOS_CLI_PATH) +
                          " validate " + q + " --set data.batch_size=64 --set data.seq_len=512 --set model.attention=reference");
  INFO(v.out);
  CHECK(v.code == 2);
  CHECK_THAT(v.out, Contains("RLIMIT_AS"));
}

TEST_CASE("hostile environment: available memory counts RLIMIT_AS", "[hostile][env][memory]") {
  if (kAddressSanitizer) {
    SUCCEED("no address-space limit under AddressSanitizer");
    return;
  }
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_AS, &old) == 0);
  const auto before = train::available_memory();
  // A limit just above what is mapped now: the budget is what is left of it.
  std::ifstream st("/proc/self/status");
  int64_t vm = 0;
  for (std::string l; std::getline(st, l);)
    if (l.rfind("VmSize:", 0) == 0) vm = std::stoll(l.substr(7)) * 1024;
  REQUIRE(vm > 0);
  rlimit lim = old;
  lim.rlim_cur = rlim_t(vm + (int64_t(64) << 20));
  if (old.rlim_max != RLIM_INFINITY && lim.rlim_cur > old.rlim_max) {
    SUCCEED("the hard limit is too low");
    return;
  }
  REQUIRE(setrlimit(RLIMIT_AS, &lim) == 0);
  const auto under = train::available_memory();
  REQUIRE(setrlimit(RLIMIT_AS, &old) == 0);
  INFO(under.source << " " << under.bytes << " (before: " << before.source << " " << before.bytes << ")");
  CHECK_THAT(under.source, Contains("RLIMIT_AS"));
  CHECK(under.bytes <= (int64_t(64) << 20));
  CHECK(under.bytes > 0);
}

TEST_CASE("hostile environment: output to a full device is an error with exit 1", "[hostile][env]") {
  if (!fs::exists("/dev/full")) {
    SUCCEED("no /dev/full");
    return;
  }
  for (const char* c : {"info", "list", "list --config --markdown", "list --env", "--help"}) {
    const std::string cmd = "timeout -s KILL 60 " + test::shell_quote(RELPOS_CLI_PATH) + " " + c;
    Run r = test::shell_run("(" + cmd + " > /dev/full)");  // stderr still to the test
    INFO(c << "\n" << r.out);
    if (std::string(c) == "--help") continue;  // CLI11 prints help itself
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Contains("cannot write to standard output"));
    CHECK_THAT(r.out, !Contains("internal error"));
    // Both to the full device: nowhere to say why, but exit 1 and no signal.
    Run both = test::shell_run("(" + cmd + " > /dev/full 2>&1)");
    CHECK(both.code == 1);
  }
}

TEST_CASE("hostile environment: messages bound long values and escape control bytes", "[hostile][env]") {
  const std::string q = RELPOS_SOURCE_DIR "/configs/quickstart.yaml";
  // A 1 MiB value on the command line is cut to its first bytes and its length.
  const std::string big(1 << 20, 'x');
  const std::string d = tmp("msg_big");
  fs::create_directories(d);
  write(d + "/big.yaml", "model:\n  position:\n    type: " + big + "\n");
  Run r = cli("validate " + d + "/big.yaml");
  INFO(r.out.substr(0, 2000));
  CHECK(r.code == 2);
  CHECK(r.out.size() < 20000);
  CHECK_THAT(r.out, Contains("bytes in all)"));
  // Control bytes (an escape sequence) from a file are escaped, never written raw.
  write(d + "/esc.yaml", "model:\n  position:\n    type: \"t5\\e[2J\\a\"\n");
  Run e = cli("validate " + d + "/esc.yaml");
  INFO(e.out);
  CHECK(e.code == 2);
  CHECK(e.out.find('\x1b') == std::string::npos);
  CHECK(e.out.find('\a') == std::string::npos);
  CHECK_THAT(e.out, Contains("\\x1b"));
  CHECK(echo_value("ab\x1b" "c\x7f", 200) == "ab\\x1bc\\x7f");
  CHECK(echo_value(std::string(300, 'y'), 10) == std::string(10, 'y') + "... (300 bytes in all)");
}

TEST_CASE("hostile environment: did-you-mean prefers a case-insensitive exact match", "[hostile][env]") {
  CHECK(nn::did_you_mean("FP16", {"fp32", "bf16", "fp16"}) == "fp16");
  CHECK(nn::did_you_mean("BF16", {"fp32", "bf16", "fp16"}) == "bf16");
  CHECK(nn::did_you_mean("fp61", {"fp32", "bf16", "fp16"}) != "");
  Run r = cli("validate " RELPOS_SOURCE_DIR "/configs/quickstart.yaml --set train.precision=FP16");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("'fp16'"));
  CHECK_THAT(r.out, !Contains("did you mean 'bf16'"));
}

TEST_CASE("hostile environment: validate refuses a device this machine cannot run, as train does", "[hostile][env]") {
  if (cuda::available()) {
    SUCCEED("this machine has a usable GPU");
    return;
  }
  const std::string d = tmp("cuda_validate");
  fs::create_directories(d);
  write(d + "/c.yaml", tiny_yaml(d + "/run", 3, "  device: cuda\n"));
  for (const char* verb : {"validate", "train"}) {
    Run r = cli(std::string(verb) + " " + d + "/c.yaml");
    INFO(verb << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("train.device is 'cuda'"));
  }
}

TEST_CASE("hostile environment: the memory estimate covers every size key and names it", "[hostile][env][memory]") {
  const std::string q = RELPOS_SOURCE_DIR "/configs/quickstart.yaml";
  // Out of range: refused by the schema, naming the key.
  Run r = cli("validate " + q + " --set model.mem_len=4611686018427387904");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("model.mem_len"));
  // In range but far beyond any machine: the estimate's largest part names the key.
  for (const auto& [set, key] :
       std::vector<std::pair<std::string, std::string>>{{"--set model.mem_len=16000000 --set model.position.type=t5", "model.mem_len"},
                                                        {"--set data.task=copy --set data.vocab_size=16000000 --set data.batch_size=64 --set data.seq_len=256", "vocabulary"},
                                                        {"--set model.attention=reference --set data.batch_size=4096 --set data.seq_len=65536 --set model.max_len=65536", "data.seq_len"}}) {
    Run m = cli("validate " + q + " " + set);
    INFO(set << "\n" << m.out);
    CHECK(m.code == 2);
    CHECK_THAT(m.out, Contains(key) && Contains("available"));
  }
}

TEST_CASE("hostile environment: an integer field of a switch too long for 64 bits is refused, not overflowed",
          "[hostile][env]") {
  // A fuzz finding (fuzz_env): RELPOS_FAULT's step of 19 nines overflowed the digit loop (UB).
  const EnvSwitch* fault = nullptr;
  for (const EnvSwitch& s : env_switches())
    if (std::string(s.name) == "RELPOS_FAULT") fault = &s;
  REQUIRE(fault != nullptr);
  CHECK(fault->check("hang:1:2").empty());
  CHECK(fault->check("hang:1:4611686018427387904").empty());  // 2^62, the largest step
  CHECK(!fault->check("hang:1:4611686018427387905").empty());
  CHECK(!fault->check("hang:1:9999999999999999909").empty());
  CHECK(!fault->check("hang:1:99999999999999999999999999").empty());
  CHECK(!fault->check("hang:1048577:1").empty());
}
