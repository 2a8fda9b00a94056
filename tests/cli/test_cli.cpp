// The relpos executable: `list`, `bias` (prints what the golden tests assert), `gradcheck`,
// exit codes. Runs the built binary (RELPOS_CLI_PATH) like a user would.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "../cli_run.h"
#include "trainers/io/file_io.h"

namespace {

using Run = relpos::test::CliRun;
Run run(const std::string& args) { return relpos::test::cli_run(args); }

}  // namespace

TEST_CASE("cli: list names every registered position encoding", "[cli]") {
  Run r = run("list");
  REQUIRE(r.code == 0);
  for (const char* name : {"none", "sinusoidal", "learned", "t5", "alibi", "rope", "shaw", "kerple_log", "kerple_power",
                           "fire", "sandwich", "dynamic_bias", "xpos", "cope", "transformer_xl", "relative_2d", "graph_spd",
                           "deberta"})
    REQUIRE_THAT(r.out, Catch::Contains(name));
  REQUIRE_THAT(r.out, Catch::Contains("[encoder only]"));
}

TEST_CASE("cli: bias --type relative_2d prints the Swin index of a 2x3 window and its bias", "[cli][golden]") {
  // index = (dh + 1) * 5 + (dw + 2) per (query, key) patch pair, d = query - key (see
  // tests/nn/test_positional_index.cpp for the hand derivation)
  const std::vector<std::vector<int64_t>> want = {{7, 6, 5, 2, 1, 0},     {8, 7, 6, 3, 2, 1},     {9, 8, 7, 4, 3, 2},
                                                  {12, 11, 10, 7, 6, 5}, {13, 12, 11, 8, 7, 6}, {14, 13, 12, 9, 8, 7}};
  Run r = run("bias --type relative_2d --param grid_h=2 --param grid_w=3 --lq 6 --lk 6 --heads 2 --table identity --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["index"].get<std::vector<std::vector<int64_t>>>() == want);
  for (int h = 0; h < 2; ++h)
    for (size_t i = 0; i < 6; ++i)
      for (size_t k = 0; k < 6; ++k) REQUIRE(j["bias"][h][i][k].get<double>() == double(want[i][k]));  // identity table
  Run text = run("bias --type relative_2d --param grid_h=2 --param grid_w=3 --lq 6 --lk 6");
  REQUIRE(text.code == 0);
  REQUIRE_THAT(text.out, Catch::Contains("index [Lq][Lk]:") && Catch::Contains("7 6 5 2 1 0") &&
                             Catch::Contains("head 3:"));
  Run causal = run("bias --type relative_2d --param grid_h=2 --param grid_w=3 --lq 6 --lk 6 --causal");
  REQUIRE(causal.code == 1);
  REQUIRE_THAT(causal.out, Catch::Contains("encoder-only"));
  Run missing = run("bias --type relative_2d --lq 6 --lk 6");
  REQUIRE(missing.code == 2);
  REQUIRE_THAT(missing.out, Catch::Contains("grid_h and grid_w") && Catch::Contains("required"));
}

TEST_CASE("cli: bias --type graph_spd says it needs a graph, deberta prints its c2p index", "[cli]") {
  Run g = run("bias --type graph_spd --lq 3 --lk 3");
  REQUIRE(g.code == 0);
  REQUIRE_THAT(g.out, Catch::Contains("needs per-example shortest-path distances"));
  Run d = run("bias --type deberta --lq 2 --lk 3 --json");
  REQUIRE(d.code == 0);
  auto j = nlohmann::json::parse(d.out);
  // rows clamp(bucket(q - k) + 256): q - k = 0, -1, -2 / 1, 0, -1
  REQUIRE(j["index"].get<std::vector<std::vector<int64_t>>>() ==
          std::vector<std::vector<int64_t>>{{256, 255, 254}, {257, 256, 255}});
  REQUIRE(j["note"].get<std::string>().find("content-dependent") != std::string::npos);
}

TEST_CASE("cli: bias --type t5 --table identity prints the golden T5 buckets", "[cli][golden]") {
  // query at absolute position 200, keys 0..400: key j has rel = j - 200
  const std::vector<int64_t> rel = {-200, -130, -20, -8, -1, 0, 1, 7, 8, 20, 130, 200};
  const std::vector<int64_t> bidir = {15, 15, 10, 8, 1, 0, 17, 23, 24, 26, 31, 31};
  const std::vector<int64_t> causal = {31, 31, 17, 8, 1, 0, 0, 0, 0, 0, 0, 0};
  for (bool is_causal : {false, true}) {
    Run r = run(std::string("bias --type t5 --heads 2 --lq 1 --lk 401 --q-offset 200 --table identity --json") +
                (is_causal ? " --causal" : " --bidirectional"));
    REQUIRE(r.code == 0);
    auto j = nlohmann::json::parse(r.out);
    for (size_t i = 0; i < rel.size(); ++i) {
      INFO((is_causal ? "causal" : "bidirectional") << " rel " << rel[i]);
      int64_t want = (is_causal ? causal : bidir)[i];
      REQUIRE(j["index"][0][size_t(200 + rel[i])].get<int64_t>() == want);
      if (is_causal && rel[i] > 0)
        REQUIRE(j["bias"][1][0][size_t(200 + rel[i])].is_null());  // masked future key
      else
        REQUIRE(j["bias"][1][0][size_t(200 + rel[i])].get<double>() == double(want));  // identity table
    }
  }
}

TEST_CASE("cli: bias --type alibi prints -m_h (i - j) with the reference slopes", "[cli][golden]") {
  for (int heads : {8, 12}) {
    Run r = run("bias --type alibi --heads " + std::to_string(heads) + " --lq 3 --lk 3 --causal --json");
    REQUIRE(r.code == 0);
    auto j = nlohmann::json::parse(r.out);
    for (int h = 0; h < heads; ++h) {
      double m = h < 8 ? std::pow(2.0, -(h + 1)) : std::pow(2.0, -0.5 - (h - 8));
      INFO(heads << " heads, head " << h);
      REQUIRE(j["bias"][h][2][0].get<double>() == Approx(-2 * m).epsilon(1e-14));  // i - j = 2
      REQUIRE(j["bias"][h][1][1].get<double>() == 0.0);
      REQUIRE(j["bias"][h][0][2].is_null());
    }
  }
  Run sym = run("bias --type alibi --heads 8 --lq 2 --lk 3 --json");
  auto j = nlohmann::json::parse(sym.out);
  REQUIRE(j["bias"][0][0][2].get<double>() == Approx(-2 * 0.5));  // -m |i - j|, i=0, j=2
}

TEST_CASE("cli: bias for the newer variants (KERPLE, Sandwich, FIRE, causal-only notes)", "[cli][golden]") {
  // KERPLE log with r1 = r2 = 1: -log(1 + |i - j|)
  Run a = run("bias --type kerple_log --heads 2 --lq 3 --lk 3 --param r1_init=1 --param r2_init=1 --json");
  REQUIRE(a.code == 0);
  auto ja = nlohmann::json::parse(a.out);
  REQUIRE(ja["bias"][1][2][0].get<double>() == Approx(-std::log(3.0)).epsilon(1e-14));
  REQUIRE(ja["bias"][0][0][2].get<double>() == Approx(-std::log(3.0)).epsilon(1e-14));
  // KERPLE power with r1 = 1, r2 = 1: ALiBi with slope 1
  Run b = run("bias --type kerple_power --heads 1 --lq 3 --lk 3 --causal --param r1_init=1 --param r2_init=1 --json");
  REQUIRE(b.code == 0);
  auto jb = nlohmann::json::parse(b.out);
  REQUIRE(jb["bias"][0][2][0].get<double>() == Approx(-2.0).epsilon(1e-14));
  REQUIRE(jb["bias"][0][0][2].is_null());
  // Sandwich (head_dim 8 in `relpos bias`): distance 0 is 0, others negative
  Run c = run("bias --type sandwich --heads 2 --lq 2 --lk 2 --json");
  REQUIRE(c.code == 0);
  auto jc = nlohmann::json::parse(c.out);
  REQUIRE(jc["bias"][0][0][0].get<double>() == 0.0);
  REQUIRE(jc["bias"][0][1][0].get<double>() < 0.0);
  // FIRE: a dense bias that depends on the query position (not Toeplitz)
  Run d = run("bias --type fire --heads 1 --lq 4 --lk 4 --param init_L=1.5 --json");
  REQUIRE(d.code == 0);
  auto jd = nlohmann::json::parse(d.out);
  REQUIRE(jd["bias"][0][2][1].get<double>() != jd["bias"][0][3][2].get<double>());
  for (const char* t : {"dynamic_bias", "xpos", "cope"}) {
    Run e = run(std::string("bias --type ") + t + " --heads 2 --lq 3 --lk 3 --causal");
    INFO(t << ": " << e.out);
    REQUIRE(e.code == 0);
  }
  REQUIRE_THAT(run("bias --type xpos --causal").out, Catch::Contains("rotary encoding"));
  REQUIRE_THAT(run("bias --type cope --causal").out, Catch::Contains("content-dependent"));
}

TEST_CASE("cli: gradcheck --type all passes for every variant", "[cli][gradcheck]") {
  Run r = run("gradcheck --type all");
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE_THAT(r.out, Catch::Contains(" 0 failed"));
  for (const char* name : {"none:", "sinusoidal:", "learned:", "t5:", "alibi:", "rope:", "shaw:", "kerple_log:",
                           "kerple_power:", "fire:", "sandwich:", "dynamic_bias:", "xpos:", "cope:", "transformer_xl:", "relative_2d:",
                           "graph_spd:", "deberta:"})
    REQUIRE_THAT(r.out, Catch::Contains(name));
  // causal-only variants are checked in their causal form only; the others in all three
  REQUIRE_THAT(r.out, Catch::Contains("xpos: causal self-attention"));
  REQUIRE_THAT(r.out, !Catch::Contains("xpos: bidirectional"));
  REQUIRE_THAT(r.out, Catch::Contains("fire: cross-attention"));
  // encodings the fused kernel serves are checked on both paths; the others on the reference one
  for (const char* name : {"t5", "shaw", "rope", "alibi"}) {
    REQUIRE_THAT(r.out, Catch::Contains(std::string(name) + ": causal self-attention [fused]"));
    REQUIRE_THAT(r.out, Catch::Contains(std::string(name) + ": causal self-attention [reference]"));
  }
  REQUIRE_THAT(r.out, Catch::Contains("transformer_xl: causal self-attention [reference]"));
  REQUIRE_THAT(r.out, !Catch::Contains("transformer_xl: causal self-attention [fused]"));
}

TEST_CASE("cli: usage and config errors exit with 2 and say what is wrong", "[cli]") {
  Run a = run("bias --lq 3");
  REQUIRE(a.code == 2);
  REQUIRE_THAT(a.out, Catch::Contains("--type is required"));
  Run b = run("bias --type t5 --param num_bucket=3");
  REQUIRE(b.code == 2);
  REQUIRE_THAT(b.out, Catch::Contains("did you mean 'num_buckets'"));
  Run c = run("bias --type roap");
  REQUIRE(c.code == 2);
  REQUIRE_THAT(c.out, Catch::Contains("did you mean 'rope'"));
  Run d = run("bias --type t5 --param nb");
  REQUIRE(d.code == 2);
  REQUIRE(run("frobnicate").code == 2);
}

TEST_CASE("cli: validate, train, eval, sample and resume work end to end", "[cli][trainer]") {
  const std::string cfg = std::string(RELPOS_SOURCE_DIR) + "/configs/encoder_decoder_reverse.yaml";
  const std::string dir = (std::filesystem::temp_directory_path() / "relpos_cli_e2e").string();
  std::filesystem::remove_all(dir);
  Run v = run("validate " + cfg);
  REQUIRE(v.code == 0);
  REQUIRE_THAT(v.out, Catch::Contains("ok"));
  const std::string sets = " --set train.steps=12 --set optim.warmup=2 --set train.eval_every=6 --set "
                           "train.checkpoint_every=6 --set output.dir=" + dir;
  Run t = run("--threads 1 train " + cfg + sets);
  INFO(t.out);
  REQUIRE(t.code == 0);
  REQUIRE_THAT(t.out, Catch::Contains("done: 12 steps"));
  Run e = run("eval " + dir + " --seq-len 4 --seq-len 12 --json");
  REQUIRE(e.code == 0);
  auto j = nlohmann::json::parse(e.out);
  REQUIRE(j.size() == 2);
  REQUIRE(j[1]["seq_len"] == 12);
  REQUIRE(j[0]["step"] == 12);
  // resume from the step-6 checkpoint of the same run: nothing left to do at step 12
  Run r = run("train " + cfg + sets + " --resume " + dir);
  REQUIRE(r.code == 2);
  REQUIRE_THAT(r.out, Catch::Contains("nothing to do"));
  Run s = run("sample " + dir);
  REQUIRE(s.code == 2);  // an encoder-decoder does not sample
  REQUIRE_THAT(s.out, Catch::Contains("only decoder models"));
}

TEST_CASE("cli: train and validate report config errors with exit code 2", "[cli]") {
  Run a = run("validate /nonexistent.yaml");
  REQUIRE(a.code == 2);
  REQUIRE_THAT(a.out, Catch::Contains("/nonexistent.yaml"));
  Run b = run("train " + std::string(RELPOS_SOURCE_DIR) + "/configs/quickstart.yaml --set model.n_layrs=3");
  REQUIRE(b.code == 2);
  REQUIRE_THAT(b.out, Catch::Contains("--set model.n_layrs=3") && Catch::Contains("did you mean 'n_layers'"));
  Run c = run("eval /nonexistent/run");
  REQUIRE(c.code == 1);
  REQUIRE_THAT(c.out, Catch::Contains("/nonexistent/run"));
}

TEST_CASE("cli: --version and info name the version, commit, build, BLAS and CUDA", "[cli]") {
  Run v = run("--version");
  REQUIRE(v.code == 0);
  REQUIRE_THAT(v.out, Catch::StartsWith("relpos 0.") && Catch::Contains("commit"));
  Run i = run("info");
  INFO(i.out);
  REQUIRE(i.code == 0);
  for (const char* key : {"git commit:", "build type:", "compiler:", "BLAS:", "CPU threads:", "CUDA:", "CUDA devices:"})
    REQUIRE_THAT(i.out, Catch::Contains(key));
  REQUIRE(run("").code == 2);  // no subcommand: usage error
}

TEST_CASE("cli: list --params prints every encoding's parameters", "[cli]") {
  Run r = run("list --params");
  INFO(r.out);
  REQUIRE(r.code == 0);
  for (const char* s : {"num_buckets", "k_max", "clamp_len", "npos_max", "position_buckets", "grid_h", "max_dist",
                        "log_distance", "scale_base", "init_L"})
    REQUIRE_THAT(r.out, Catch::Contains(s));
  REQUIRE(run("list --markdown").code == 2);
}

TEST_CASE("cli: numbers the user did not give are refused (nan factors, clamped seeds, huge inspect sizes)", "[cli]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "relpos_cli_numbers").string();
  std::filesystem::remove_all(dir);
  Run t = run("train " RELPOS_SOURCE_DIR "/configs/quickstart.yaml --set data.path=" RELPOS_SOURCE_DIR
              "/data/tinyshakespeare.txt --set model.d_model=16 --set model.n_layers=1 --set model.n_heads=2 "
              "--set model.d_ff=32 --set train.steps=2 --set optim.warmup=0 --set train.eval_every=2 "
              "--set train.checkpoint_every=2 --set output.dir=" + dir);
  INFO(t.out);
  REQUIRE(t.code == 0);
  for (const char* bad : {"nan", "inf", "-2", "0", "2x"}) {
    Run r = run("eval " + dir + " --rope-scaling linear --rope-factor " + bad);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("--rope-factor"));
  }
  Run s = run("sample " + dir + " --tokens 2 --seed 18446744073709551616");
  INFO(s.out);
  CHECK(s.code == 2);
  CHECK_THAT(s.out, Catch::Contains("larger than 2^64 - 1"));
  CHECK(run("sample " + dir + " --tokens 2 --seed 18446744073709551615").code == 0);
  Run d = run("inspect " + dir + " --distances 1000000000");
  CHECK(d.code == 2);
  CHECK_THAT(d.out, Catch::Contains("--distances"));
  Run e = run("inspect " + dir + " --text ''");
  INFO(e.out);
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Catch::Contains("inspect --text: 0 tokens"));
  Run l = run("inspect " + dir + " --text " + std::string(600, 'a'));
  CHECK(l.code == 2);
  CHECK_THAT(l.out, Catch::Contains("600 tokens"));
  {  // another process writing the same inspect / report folder
    std::filesystem::create_directories(dir + "/inspect");
    std::filesystem::create_directories(dir + "/report");
    relpos::DirLock a(dir + "/inspect", "test"), b(dir + "/report", "test");
    Run i = run("inspect " + dir);
    CHECK(i.code == 1);
    CHECK_THAT(i.out, Catch::Contains("in use by another relpos process"));
    Run r = run("report " + dir);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains("in use by another relpos process"));
  }
  CHECK(run("inspect " + dir).code == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: symlink loops and files where a directory is needed are named errors, not internal ones", "[cli]") {
  const auto tmp = std::filesystem::temp_directory_path();
  const std::string loop = (tmp / "relpos_cli_loop").string(), file = (tmp / "relpos_cli_file").string();
  std::filesystem::remove_all(loop);
  std::filesystem::create_symlink(loop, loop);  // a -> a
  { std::ofstream(file) << "x"; }
  const std::string cfg = RELPOS_SOURCE_DIR "/configs/encoder_sort.yaml --set train.steps=2 --set optim.warmup=0";
  for (const std::string& out : {loop, loop + "/run", file + "/run"}) {
    Run r = run("train " + cfg + " --set output.dir=" + out);
    INFO(out << ": " << r.out);
    CHECK((r.code == 1 || r.code == 2));
    CHECK_THAT(r.out, !Catch::Contains("internal error"));
    CHECK_THAT(r.out, Catch::Contains("relpos_cli_"));
  }
  Run e = run("eval " + loop);
  CHECK((e.code == 1 || e.code == 2));
  CHECK_THAT(e.out, !Catch::Contains("internal error"));
  std::filesystem::remove(loop);
  std::filesystem::remove(file);
}

TEST_CASE("cli: a one-line data file (no newline) trains and samples, a bad head count names the file", "[cli]") {
  const auto tmp = std::filesystem::temp_directory_path();
  const std::string data = (tmp / "relpos_cli_oneline.txt").string(), dir = (tmp / "relpos_cli_oneline").string();
  {
    std::ofstream f(data);
    for (int i = 0; i < 400; ++i) f << "abcdefgh ";  // no '\n' anywhere
  }
  std::filesystem::remove_all(dir);
  Run t = run("train " RELPOS_SOURCE_DIR "/configs/quickstart.yaml --set data.path=" + data +
              " --set model.d_model=16 --set model.n_layers=1 --set model.n_heads=2 --set model.d_ff=32"
              " --set data.seq_len=16 --set train.steps=2 --set optim.warmup=0 --set train.eval_every=2"
              " --set train.checkpoint_every=2 --set output.dir=" + dir);
  INFO(t.out);
  CHECK(t.code == 0);  // was: trained, checkpointed, then exit 1 on the closing sample's prompt '\n'
  CHECK_THAT(t.out, Catch::Contains("sample:"));
  Run h = run("validate " RELPOS_SOURCE_DIR "/configs/quickstart.yaml --set model.n_heads=5");
  CHECK(h.code == 2);
  CHECK_THAT(h.out, Catch::Contains("model.d_model") && Catch::Contains("model.n_heads"));
  Run f = run("validate " RELPOS_SOURCE_DIR "/configs/encoder_sort.yaml --set model.d_model=30");
  INFO(f.out);
  CHECK(f.code == 2);
  CHECK_THAT(f.out, Catch::Contains("encoder_sort.yaml"));  // was ":5:12:" without the file
  std::filesystem::remove_all(dir);
  std::filesystem::remove(data);
}

TEST_CASE("cli: every file in cli/verbs is a verb that --help lists and that prints its own help", "[cli][structure]") {
  // One verb per file (cli/command.h); the table in cli/commands.cpp must list each of them.
  const Run top = run("--help");
  REQUIRE(top.code == 0);
  int verbs = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(RELPOS_SOURCE_DIR) / "cli" / "verbs")) {
    if (e.path().extension() != ".cpp") continue;
    const std::string verb = e.path().stem().string();
    INFO(verb);
    CHECK_THAT(top.out, Catch::Contains("  " + verb + " "));
    const Run r = run(verb + " --help");
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("relpos " + verb));
    ++verbs;
  }
  CHECK(verbs == 13);
}
