// Hostile inputs to the CLI and the config loader: overflowing, huge, negative and
// non-finite sizes, duplicate keys, empty overrides, bad data files, directories. Every bad
// input must end in a named error with exit 2 (config/usage) — never a signal, a hang, an
// "internal error" or exit 0. Expected messages are written by hand from the issue.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "../trainers/hostile_helpers.h"
#include "trainers/config.h"
#include "trainers/data/data.h"
#include "trainers/io/file_io.h"

using namespace relpos::hostile;
using Catch::Contains;

namespace {
const std::string kQuick = RELPOS_SOURCE_DIR "/configs/quickstart.yaml";

// Exit 2 with a message containing `what`, and no "internal error".
void config_error(const std::string& args, const std::string& what) {
  Run r = cli(args);
  INFO(args << "\n" << r.out);
  REQUIRE(r.code == 2);
  REQUIRE_THAT(r.out, Contains(what));
  REQUIRE_THAT(r.out, !Contains("internal error"));
}
}  // namespace

TEST_CASE("hostile: sizes whose product overflows int64 are config errors naming the keys", "[hostile]") {
  config_error("train " + kQuick + " --set data.batch_size=281474976710656 --set data.seq_len=65536", "data.batch_size");
  // (the attention term of the fused path is O(L): the activations' product is what overflows)
  config_error("validate " + kQuick + " --set data.batch_size=16777216 --set data.seq_len=16777216 --set model.d_ff=65536",
               "overflows");
  config_error("validate " + kQuick + " --set data.batch_size=16777216 --set data.seq_len=16777216 "
               "--set model.attention=reference", "overflows");  // B H L^2
  config_error("validate " + kQuick + " --set data.batch_size=-1", "data.batch_size");
  config_error("validate " + kQuick + " --set model.d_model=99999999999999999999", "model.d_model");
  config_error("validate " + kQuick + " --set model.n_layers=4611686018427387904", "model.n_layers");
}

TEST_CASE("hostile: CLI sizes are capped, not clamped", "[hostile]") {
  config_error("bias --type t5 --lq 4611686018427387904 --lk 4", "--lq");
  config_error("bias --type t5 --lq 4 --lk -3", "--lk");
  config_error("bias --type t5 --heads 100000", "--heads");
  config_error("bias --type t5 --heads 256 --lq 4096 --lk 4096", "more than");
  config_error("bias --type t5 --q-offset 9223372036854775807", "--q-offset");
  config_error("sample /nonexistent --tokens 99999999999999999999", "--tokens");
  config_error("eval /nonexistent --seq-len 4611686018427387904", "--seq-len");
}

TEST_CASE("hostile: a config that cannot fit in memory is refused up front, with an override", "[hostile]") {
  // 2^16 wide, 10^5 long: terabytes of activations (the estimate names the driving keys).
  const std::string big = "validate " + kQuick + " --set model.d_model=65536 --set model.n_heads=1 --set data.seq_len=100000";
  config_error(big, "data.seq_len");
  Run r = cli(big + " --ignore-memory-check");
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE_THAT(r.out, Contains("estimated memory"));
}

TEST_CASE("hostile: position parameters that would hang or explode are rejected", "[hostile]") {
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_dynamic_bias.yaml --set model.position.depth=100000000",
               "depth");
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_shaw.yaml --set model.position.k_max=4611686018427387904",
               "k_max");
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_t5.yaml --set model.position.num_buckets=60000 "
               "--set model.d_model=65536 --set model.n_heads=1", "num_buckets");
}

TEST_CASE("hostile: non-finite numbers are rejected everywhere", "[hostile]") {
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_fire.yaml --set model.position.init_c=.nan", "init_c");
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_kerple_log.yaml --set model.position.r1_init=.inf",
               "r1_init");
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_rope.yaml --set model.position.beta_fast=.nan",
               "beta_fast");
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_rope.yaml --set model.position.beta_fast=nan",
               "beta_fast");
  config_error("validate " + kQuick + " --set optim.lr=.nan", "optim.lr");
  config_error("validate " + kQuick + " --set model.bias_scale.init=-.inf", "bias_scale.init");
  config_error("validate " + kQuick + " --set 'optim.betas=[.nan, 0.9]'", "optim.betas");
}

TEST_CASE("hostile: malformed values are named errors, not internal errors", "[hostile]") {
  config_error("validate " + kQuick + " --set 'optim.betas=[abc, 0.9]'", "optim.betas");
  config_error("validate " + kQuick + " --set 'optim.betas=[[1], 0.9]'", "optim.betas");
  config_error("validate " + kQuick + " --set 'optim.no_decay=[{a: 1}]'", "optim.no_decay");
  config_error("validate " + kQuick + " --set model.position.type=", "empty");
  config_error("validate " + kQuick + " --set 'model.position.type=  '", "empty");
  config_error("validate " + kQuick + " --set =3", "key=value");
  config_error("validate " + kQuick + " --set output.dir=''", "output.dir");
}

TEST_CASE("hostile: duplicate YAML keys are errors naming both lines", "[hostile]") {
  std::string d = tmp("dup");
  fs::create_directories(d);
  write(d + "/a.yaml", "model:\n  d_model: 64\n  d_model: 32\n");
  config_error("validate " + d + "/a.yaml", "duplicate key 'model.d_model'");
  write(d + "/b.yaml", "train:\n  steps: 3\ntrain:\n  steps: 4\n");
  config_error("validate " + d + "/b.yaml", "first at line 1");
  // parse_config directly, inside a nested mapping of position parameters
  REQUIRE_THROWS_WITH(relpos::train::parse_config("model:\n  position:\n    type: t5\n    type: alibi\n", "x.yaml"),
                      Contains("duplicate key 'model.position.type'"));
}

TEST_CASE("hostile: config files that are directories, empty, missing or not UTF-8", "[hostile]") {
  config_error("validate " RELPOS_SOURCE_DIR "/configs", "directory");
  std::string d = tmp("cfgfiles");
  fs::create_directories(d);
  write(d + "/empty.yaml", "");
  config_error("validate " + d + "/empty.yaml", "empty");
  config_error("validate " + d + "/missing.yaml", "does not exist");
  write(d + "/latin1.yaml", "output:\n  dir: caf\xe9\n");
  config_error("validate " + d + "/latin1.yaml", "invalid UTF-8 at byte offset 18");
  write(d + "/list.yaml", "- a\n- b\n");
  config_error("validate " + d + "/list.yaml", "mapping");
  write(d + "/complexkey.yaml", "? [a, b]\n: 1\n");
  config_error("validate " + d + "/complexkey.yaml", "plain name");
}

TEST_CASE("hostile: data files are checked by validate: missing, directory, empty, invalid UTF-8", "[hostile]") {
  std::string d = tmp("datafiles");
  fs::create_directories(d + "/adir");
  write(d + "/empty.txt", "");
  // Overlong '/', a surrogate, a code point above U+10FFFF, a truncated sequence: each is
  // rejected with its byte offset (the lenient decoder let these through until the checkpoint).
  write(d + "/overlong.txt", std::string("hello\xc0\xaf", 7));
  write(d + "/surrogate.txt", std::string("ab\xed\xa0\x80", 5));
  write(d + "/toobig.txt", std::string("abc\xf4\x90\x80\x80", 7));
  write(d + "/truncated.txt", std::string("abcd\xe2\x82", 6));
  const std::string v = "validate " + kQuick + " --set data.path=";
  config_error(v + d + "/missing.txt", "does not exist");
  config_error(v + d + "/adir", "directory");
  config_error(v + d + "/empty.txt", "empty");
  config_error(v + d + "/overlong.txt", "byte offset 5");
  config_error(v + d + "/surrogate.txt", "byte offset 2");
  config_error(v + d + "/toobig.txt", "byte offset 3");
  config_error(v + d + "/truncated.txt", "byte offset 4");
}

TEST_CASE("hostile: strict UTF-8 agrees with the JSON writer", "[hostile]") {
  // utf8_error_offset must accept exactly what nlohmann::json can dump.
  for (std::string s : {std::string("plain"), std::string("\xc3\xa9t\xc3\xa9"), std::string("\xf0\x9f\x98\x80"),
                        std::string("\xc0\x80"), std::string("\xed\xbf\xbf"), std::string("\xf8\x88\x80\x80\x80"),
                        std::string("\xe0\x80\xaf"), std::string("\xf4\x8f\xbf\xbf"), std::string("\xff")}) {
    bool json_ok = true;
    try {
      (void)nlohmann::json(s).dump();
    } catch (const nlohmann::json::exception&) {
      json_ok = false;
    }
    INFO(nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
    REQUIRE(json_ok == (relpos::utf8_error_offset(s) == std::string::npos));
  }
}

TEST_CASE("hostile: bias_scale on an encoding without an additive bias is refused", "[hostile]") {
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_cope.yaml --set model.bias_scale.enabled=true", "cope");
  config_error("validate " RELPOS_SOURCE_DIR "/configs/decoder_rope.yaml --set model.bias_scale.enabled=true", "rope");
  Run r = cli("validate " RELPOS_SOURCE_DIR "/configs/decoder_fire.yaml --set model.bias_scale.enabled=true");
  INFO(r.out);
  REQUIRE(r.code == 0);  // FIRE's bias is additive: alpha applies
}
