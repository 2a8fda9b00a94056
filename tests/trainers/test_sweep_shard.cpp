// Sweeps split across processes (experiments/sweep.h): `relpos sweep --shard I/N` shards running at
// the same time into one directory, each with its own index file; `--print-commands` and
// `--point I`; every index file read for skipping and merged by read_sweep_index and
// `relpos report` (scripts/report.py). Runs the built binary (RELPOS_CLI_PATH) like a user would.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "experiments/sweep.h"
#include "../cli_run.h"
#include "sweep_helpers.h"

using namespace relpos;
namespace fs = std::filesystem;

namespace {

using Cli = test::CliRun;
using test::shell_run;
std::string q(const std::string& s) { return test::shell_quote(s); }
Cli sh(const std::string& cmd) { return shell_run(cmd); }
Cli relpos_cli(const std::string& args) { return test::cli_run(args); }

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<nlohmann::json> lines(const fs::path& path) { return test::json_lines(path.string()); }

// A fresh directory (its name holds a space: every printed command must quote it) with a
// 4-point spec: grid {alibi, t5} x recipes {base, zl}, 6 steps each, evaluated at 5 and 10.
fs::path make_spec(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("relpos_test_sweep shard_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "spec.yaml") << test::kTinySweepSpec;
  return dir;
}

std::set<std::string> index_file_names(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& f : train::sweep_index_files(dir.string())) out.insert(fs::path(f).filename().string());
  return out;
}

// The per-point results two runs of one spec must share (run_dir, seconds and finished_at differ).
void check_same_results(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("point " << i << ": " << a[i].dump());
    CHECK(a[i]["index"] == int64_t(i));
    CHECK(a[i]["status"] == "done");
    for (const char* key : {"index", "name", "status", "grid", "recipe", "overrides", "steps", "first_divergence_step",
                            "final_train_loss", "final_val_loss", "eval"})
      CHECK(a[i][key] == b[i][key]);  // numbers compare exactly: each point is deterministic
    CHECK(a[i]["final_train_loss"].is_number());
    CHECK(a[i]["eval"].size() == 2);
  }
}

// Every figure's data (report/*.json) of two sweep reports, parsed.
std::map<std::string, nlohmann::json> report_data(const fs::path& sweep_dir) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& e : fs::directory_iterator(sweep_dir / "report"))
    if (e.path().extension() == ".json") out[e.path().filename().string()] = nlohmann::json::parse(slurp(e.path()));
  return out;
}

}  // namespace

TEST_CASE("sweep shard: two shards run at once into one directory give the whole sweep's results and report",
          "[sweep][shard][cli]") {
  const fs::path root = make_spec("acceptance");
  const std::string spec = (root / "spec.yaml").string();
  const fs::path sharded = root / "sharded", whole = root / "whole";
  // Both shards start together (one shell, two background processes), into one directory.
  auto shard_cmd = [&](int i) {
    return fmt::format("({} sweep {} --dir {} --shard {}/2 > {} 2>&1; echo $? > {})", q(RELPOS_CLI_PATH), q(spec),
                       q(sharded.string()), i, q((root / fmt::format("shard{}.log", i)).string()),
                       q((root / fmt::format("shard{}.rc", i)).string()));
  };
  REQUIRE(std::system((shard_cmd(0) + " & " + shard_cmd(1) + " & wait").c_str()) == 0);
  for (int i = 0; i < 2; ++i) {
    INFO(slurp(root / fmt::format("shard{}.log", i)));
    REQUIRE(slurp(root / fmt::format("shard{}.rc", i)) == "0\n");
    CHECK_THAT(slurp(root / fmt::format("shard{}.log", i)),
               Catch::Contains(fmt::format("shard {}/2: 2 of 4 points", i)) &&
                   Catch::Contains(fmt::format("sweep.shard-{}-of-2.jsonl", i)));
  }
  CHECK(index_file_names(sharded) == std::set<std::string>{"sweep.shard-0-of-2.jsonl", "sweep.shard-1-of-2.jsonl"});
  // Point i went to shard i mod 2.
  for (int s = 0; s < 2; ++s) {
    auto recs = lines(sharded / fmt::format("sweep.shard-{}-of-2.jsonl", s));
    REQUIRE(recs.size() == 2);
    CHECK(recs[0]["index"] == s);
    CHECK(recs[1]["index"] == s + 2);
  }

  Cli w = relpos_cli("sweep " + q(spec) + " --dir " + q(whole.string()));
  INFO(w.out);
  REQUIRE(w.code == 0);
  CHECK(index_file_names(whole) == std::set<std::string>{"sweep.jsonl"});
  CHECK(slurp(sharded / "sweep.json") == slurp(whole / "sweep.json"));  // every process writes the same metadata

  const auto merged = train::read_sweep_index(sharded.string());
  const auto all = train::read_sweep_index(whole.string());
  REQUIRE(merged.size() == 4);
  check_same_results(merged, all);
  check_same_results(all, lines(whole / "sweep.jsonl"));

  // `relpos report` reads every index file: the same figures, drawing the same numbers.
  Cli rs = relpos_cli("report " + q(sharded.string()));
  INFO(rs.out);
  REQUIRE(rs.code == 0);
  Cli rw = relpos_cli("report " + q(whole.string()));
  INFO(rw.out);
  REQUIRE(rw.code == 0);
  const auto ds = report_data(sharded), dw = report_data(whole);
  CHECK(ds.count("extrapolation.json") == 1);
  CHECK(ds.count("train_loss_all.json") == 1);
  REQUIRE(ds.size() == dw.size());
  for (const auto& [name, data] : dw) {
    INFO(name);
    REQUIRE(ds.count(name) == 1);
    CHECK(ds.at(name) == data);
  }
  REQUIRE(ds.at("extrapolation.json")["series"].size() == 4);
  for (size_t i = 0; i < 4; ++i)
    CHECK(ds.at("extrapolation.json")["series"][i]["y"][1] == merged[i]["eval"][1]["loss"]);
  auto md = [](const fs::path& p) {  // report.md without its title line (it names the directory)
    std::string s = slurp(p / "report" / "report.md");
    return s.substr(s.find('\n'));
  };
  CHECK(md(sharded) == md(whole));
}

TEST_CASE("sweep shard: a bad --shard or --point exits 2 and says what was expected", "[sweep][shard][cli]") {
  const fs::path root = make_spec("bad");
  const std::string base = "sweep " + q((root / "spec.yaml").string()) + " --dir " + q((root / "out").string());
  for (const char* bad : {"3/2", "2/2", "0/0", "-1/2", "1/-2", "x", "1", "1/", "/2", "1/2/3", "a/b"}) {
    Cli r = relpos_cli(base + " --shard " + q(bad));
    INFO(bad << ": " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(fmt::format("--shard: expected I/N with 0 <= I < N, got '{}'", bad)));
  }
  Cli r = relpos_cli(base + " --point 4");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--point: expected a point index 0..3 or a point name") && Catch::Contains("'4'"));
  r = relpos_cli(base + " --point 1 --shard 0/2");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--point and --shard"));
  CHECK_FALSE(fs::exists(root / "out"));  // nothing ran, nothing was written

  CHECK(train::parse_shard("0/1") == std::pair<int, int>{0, 1});
  CHECK(train::parse_shard("6/7") == std::pair<int, int>{6, 7});
  CHECK_THROWS_AS(train::parse_shard("99999999999/99999999999999"), ConfigError);
  train::SweepSpec spec = train::load_sweep_spec((root / "spec.yaml").string());
  CHECK(train::find_point(spec, "2") == 2);
  CHECK(train::find_point(spec, "type=t5 zl") == 3);
  CHECK_THROWS_WITH(train::find_point(spec, "type=t5"), Catch::Contains("--point"));
  train::SweepOptions o;
  o.shard_index = 2, o.shard_count = 2;
  CHECK_THROWS_WITH(train::selected_points(spec, o), Catch::Contains("--shard: expected I/N with 0 <= I < N, got '2/2'"));
  o.shard_index = 1, o.shard_count = 3;
  CHECK(train::selected_points(spec, o) == std::vector<int64_t>{1});
  CHECK(train::sweep_index_name(o) == "sweep.shard-1-of-3.jsonl");
  o.shard_index = 4, o.shard_count = 5;  // more shards than points: this one has nothing to do
  CHECK(train::selected_points(spec, o).empty());
  CHECK(train::sweep_index_name(train::SweepOptions{}) == "sweep.jsonl");
}

TEST_CASE("sweep shard: --print-commands prints one line per point, running every line completes the sweep",
          "[sweep][shard][cli]") {
  const fs::path root = make_spec("commands");
  const fs::path out = root / "out";
  const std::string args = "sweep " + q((root / "spec.yaml").string()) + " --dir " + q(out.string());
  Cli p = relpos_cli("--threads 1 " + args + " --print-commands");
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK_FALSE(fs::exists(out));  // printing runs nothing
  std::vector<std::string> cmds;
  std::istringstream in(p.out);
  for (std::string l; std::getline(in, l);) cmds.push_back(l);
  REQUIRE(cmds.size() == 4);
  for (size_t i = 0; i < cmds.size(); ++i) {
    CHECK_THAT(cmds[i], Catch::StartsWith(std::string(RELPOS_CLI_PATH) + " --threads 1 sweep '") &&
                            Catch::EndsWith(fmt::format(" --point {}", i)));
    // The shell gets the spec path with its space intact (the command runs from another directory).
    Cli r = sh("cd / && " + cmds[i]);
    INFO(cmds[i] << "\n" << r.out);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains(fmt::format("sweep.point-{}.jsonl", i)));
  }
  CHECK(index_file_names(out) == std::set<std::string>{"sweep.point-0.jsonl", "sweep.point-1.jsonl",
                                                        "sweep.point-2.jsonl", "sweep.point-3.jsonl"});
  auto merged = train::read_sweep_index(out.string());
  REQUIRE(merged.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(merged[i]["index"] == int64_t(i));
    CHECK(merged[i]["status"] == "done");
    CHECK(lines(out / fmt::format("sweep.point-{}.jsonl", i)).size() == 1);
  }
  // A second run of a line skips its point; the whole sweep then has nothing left to do.
  Cli again = sh(cmds[2]);
  CHECK(again.code == 0);
  CHECK_THAT(again.out, Catch::Contains("already done, skipped"));
  CHECK(lines(out / "sweep.point-2.jsonl").size() == 1);
  Cli rest = relpos_cli(args);
  CHECK(rest.code == 0);
  CHECK_THAT(rest.out, Catch::Contains("0 points run, 4 skipped"));
  // The shard variant prints the shard's points only.
  Cli s = relpos_cli(args + " --shard 1/2 --print-commands");
  CHECK(s.code == 0);
  CHECK_THAT(s.out, Catch::EndsWith(" --point 1\n" + std::string(RELPOS_CLI_PATH) + " sweep " +
                                    q((root / "spec.yaml").string()) + " --dir " + q(out.string()) + " --point 3\n"));
  // --point also takes a point's name.
  Cli byname = relpos_cli(args + " --point " + q("type=t5 base"));
  CHECK(byname.code == 0);
  CHECK_THAT(byname.out, Catch::Contains("[type=t5 base] already done, skipped"));
}

TEST_CASE("sweep shard: a point done by a shard is skipped by a later unsharded run", "[sweep][shard][cli]") {
  const fs::path root = make_spec("skip");
  const fs::path out = root / "out";
  Cli s = relpos_cli("sweep " + q((root / "spec.yaml").string()) + " --dir " + q(out.string()) + " --shard 0/2");
  INFO(s.out);
  REQUIRE(s.code == 0);
  REQUIRE(lines(out / "sweep.shard-0-of-2.jsonl").size() == 2);
  train::SweepSpec spec = train::load_sweep_spec((root / "spec.yaml").string());
  train::SweepOptions o;
  o.dir = out.string();
  std::vector<int64_t> started;
  o.before_point = [&](const train::SweepPoint& p) { started.push_back(p.index); };
  train::SweepResult r = train::run_sweep(spec, o);
  CHECK(r.skipped == 2);
  CHECK(r.ran == 2);
  CHECK(started == std::vector<int64_t>{1, 3});
  CHECK(r.index_file == (out / "sweep.jsonl").string());
  auto idx = lines(out / "sweep.jsonl");
  REQUIRE(idx.size() == 2);
  CHECK(idx[0]["index"] == 1);
  CHECK(idx[1]["index"] == 3);
  REQUIRE(r.records.size() == 4);
  CHECK(r.records[0]["status"] == "done");  // the shard's record
  CHECK(r.records[2]["name"] == "type=t5 base");
  // Now everything is done somewhere: an unsharded run, the other shard and a point skip it all.
  started.clear();
  train::SweepResult again = train::run_sweep(spec, o);
  CHECK(again.skipped == 4);
  CHECK(started.empty());
  o.shard_index = 1, o.shard_count = 2;
  CHECK(train::run_sweep(spec, o).skipped == 2);
  o.shard_index = 0, o.shard_count = 1, o.point = 2;
  CHECK(train::run_sweep(spec, o).skipped == 1);
  CHECK(started.empty());
  CHECK(lines(out / "sweep.jsonl").size() == 2);
}

TEST_CASE("sweep shard: read_sweep_index merges every index file (done first, then the later one, by index)",
          "[sweep][shard]") {
  const fs::path dir = fs::temp_directory_path() / "relpos_test_sweep_shard_merge";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto rec = [&dir](int64_t index, const std::string& name, const std::string& status, double at, const std::string& tag) {
    nlohmann::json j = {{"index", index}, {"name", name}, {"status", status}, {"tag", tag}, {"run_dir", (dir / name).string()}};
    if (at > 0) j["finished_at"] = at;
    return j.dump() + "\n";
  };
  // p0: failed in sweep.jsonl (later), done in a shard file -> the done line.
  // p1: done twice -> the later finished_at, whichever file it is in.
  // p2: two done lines without finished_at (an older sweep.jsonl) -> the later line.
  // p3: failed only -> the failed line (it is rerun, but reported).
  std::ofstream(dir / "sweep.jsonl") << rec(2, "p2", "done", 0, "first") << rec(2, "p2", "done", 0, "second")
                                     << rec(1, "p1", "done", 200, "newer") << "{\"index\": 9, \"name\": \"cut"
                                     << "\n" << rec(0, "p0", "failed", 300, "failed");
  std::ofstream(dir / "sweep.shard-0-of-2.jsonl") << rec(0, "p0", "done", 100, "done") << rec(1, "p1", "done", 100, "older");
  std::ofstream(dir / "sweep.point-3.jsonl") << rec(3, "p3", "failed", 50, "failed") << "[1, 2]\n";
  std::ofstream(dir / "sweep.other.jsonl") << rec(4, "p4", "done", 1, "not an index file");
  std::ofstream(dir / "sweep.shard-.jsonl") << rec(5, "p5", "done", 1, "not an index file");
  CHECK(index_file_names(dir) ==
        std::set<std::string>{"sweep.jsonl", "sweep.shard-0-of-2.jsonl", "sweep.point-3.jsonl"});
  auto m = train::read_sweep_index(dir.string());
  REQUIRE(m.size() == 4);
  for (int64_t i = 0; i < 4; ++i) CHECK(m[size_t(i)]["index"] == i);
  CHECK(m[0]["tag"] == "done");
  CHECK(m[1]["tag"] == "newer");
  CHECK(m[2]["tag"] == "second");
  CHECK(m[3]["tag"] == "failed");
  // scripts/report.py merges the same way: its summary table lists the same lines.
  Cli r = relpos_cli("report " + q(dir.string()));
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::string md = slurp(dir / "report" / "report.md");
  // The report names the directory, whose parent is a random mkdtemp name ("relpos_tests.kp4czT" once made a
  // bare "p4" match): drop every copy of the path before looking for names that must not be there.
  for (size_t at; (at = md.find(dir.string())) != std::string::npos;) md.erase(at, dir.string().size());
  CHECK_THAT(md, Catch::Contains("| 0 | p0 | done |") && Catch::Contains("| 3 | p3 | failed |") &&
                     !Catch::Contains("p4") && !Catch::Contains("p5") && !Catch::Contains("cut"));
  CHECK_THAT(md, Catch::Contains("4 points"));
}
