// Token files (trainers/data/token_file.h, docs/data.md): the writer and reader agree on every
// field, the Python writer (scripts/prepare_tokens.py) writes the same bytes, llm.c shards read as
// their layout says, data.task tokens splits by example, and hostile files — truncated, wrong
// magic, counts past the end, values outside their ranges, empty, a FIFO, a 10 GB sparse file, a
// tokenizer model that is not one — are each a clear error naming the file and the field.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../cli_run.h"
#include "../helpers.h"
#include "core/error.h"
#include "trainers/config.h"
#include "trainers/data/data.h"
#include "trainers/data/token_file.h"
#include "trainers/data/tokenizer.h"

using namespace relpos;
using namespace relpos::train;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

std::string tmp_dir(const std::string& name) { return test::scratch_dir("relpos_tokens_" + name); }

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void spit(const std::string& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// The error message of opening `path` (empty when it opens).
std::string open_error(const std::string& path, uint64_t vocab = 0) {
  try {
    TokenFile f(path, vocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A small file with two channels: 3 examples of lengths 4, 3, 5 over a vocabulary of 6 strings.
struct Sample {
  std::vector<int64_t> tokens = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5};
  std::vector<uint64_t> starts = {0, 4, 7};
  std::vector<std::string> vocab = {"a", "b", "c", " ", "\n", "é"};
  std::vector<TokenChannel> channels = {{"depth", ChannelScope::Token, 0, 7}, {"label", ChannelScope::Example, 0, 9}};
  std::vector<std::vector<int32_t>> values = {{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3}, {9, 0, 4}};
};

std::string llmc_shard(uint32_t magic, int32_t version, int32_t count, const std::vector<uint32_t>& toks, int width) {
  std::string b(1024, '\0');
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, &version, 4);
  std::memcpy(b.data() + 8, &count, 4);
  for (uint32_t t : toks) {
    if (width == 2) {
      const uint16_t v = uint16_t(t);
      b.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      b.append(reinterpret_cast<const char*>(&t), 4);
    }
  }
  return b;
}

}  // namespace

TEST_CASE("token file: what the writer writes reads back field by field", "[data][tokens]") {
  const std::string d = tmp_dir("roundtrip"), p = d + "/s.rptok";
  const Sample s;
  write_token_file(p, 6, s.tokens, s.starts, s.vocab, s.channels, s.values);
  const TokenFile f(p);
  const TokenFileInfo& in = f.info();
  CHECK(in.layout == TokenFileLayout::Relpos);
  CHECK(in.token_bytes == 2);
  CHECK(in.vocab_size == 6);
  CHECK(in.n_tokens == 12);
  CHECK(in.n_examples == 3);
  CHECK(in.vocab == s.vocab);
  CHECK(f.tokens(0, 12) == s.tokens);
  CHECK(f.example_start(0) == 0);
  CHECK(f.example_start(1) == 4);
  CHECK(f.example_start(2) == 7);
  CHECK(f.example_start(3) == 12);
  REQUIRE(in.channels.size() == 2);
  CHECK(in.channels[0].name == "depth");
  CHECK(in.channels[1].scope == ChannelScope::Example);
  CHECK(in.channels[1].max == 9);
  for (uint64_t i = 0; i < 12; ++i) CHECK(f.channel(0, i) == s.values[0][i]);
  for (uint64_t i = 0; i < 3; ++i) CHECK(f.channel(1, i) == s.values[1][i]);
  // uint32 tokens for a vocabulary past 65536.
  const std::string p4 = d + "/big.rptok";
  write_token_file(p4, 70000, {69999, 0, 65536}, {0});
  const TokenFile g(p4);
  CHECK(g.info().token_bytes == 4);
  CHECK(g.tokens(0, 3) == std::vector<int64_t>{69999, 0, 65536});
  CHECK_THAT(describe_token_file(f), Contains("depth") && Contains("values [0, 7]") && Contains("decoded:"));
}

TEST_CASE("token file: scripts/prepare_tokens.py writes the bytes the C++ writer writes", "[data][tokens][python]") {
  const std::string d = tmp_dir("python");
  const Sample s;
  write_token_file(d + "/cpp.rptok", 6, s.tokens, s.starts, s.vocab, s.channels, s.values);
  // The same input through the Python module (its own CRC from zlib, its own packing).
  const std::string py = "import sys; sys.path.insert(0, '" RELPOS_SOURCE_DIR "/scripts'); import prepare_tokens as p; "
                         "p.write_token_file('" + d + "/py.rptok', 6, [0,1,2,3,4,5,0,1,2,3,4,5], [0,4,7], "
                         "['a','b','c',' ','\\n','\\u00e9'], [('depth','token',0,7,[0,1,2,3,4,5,6,7,0,1,2,3]), "
                         "('label','example',0,9,[9,0,4])])";
  const test::CliRun r = test::shell_run("python3 -c " + test::shell_quote(py));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(slurp(d + "/py.rptok") == slurp(d + "/cpp.rptok"));
  CHECK(TokenFile(d + "/py.rptok").tokens(0, 12) == s.tokens);
}

TEST_CASE("token file: llm.c shards read with their layout and vocabulary", "[data][tokens][llmc]") {
  const std::string d = tmp_dir("llmc");
  spit(d + "/gpt2.bin", llmc_shard(20240520, 1, 4, {50256, 0, 17, 50256}, 2));
  const TokenFile g(d + "/gpt2.bin");
  CHECK(g.info().layout == TokenFileLayout::Llmc);
  CHECK(g.info().vocab_size == 50257);
  CHECK(g.tokens(0, 4) == std::vector<int64_t>{50256, 0, 17, 50256});
  spit(d + "/llama.bin", llmc_shard(20240801, 7, 2, {128000, 5}, 4));
  CHECK(TokenFile(d + "/llama.bin").info().vocab_size == 128256);
  CHECK(TokenFile(d + "/llama.bin").tokens(0, 2) == std::vector<int64_t>{128000, 5});
  // A vocabulary given in the config: tokens past it are refused, naming the index and value.
  CHECK_THAT(open_error(d + "/gpt2.bin", 1000), Contains("'tokens'[0] = 50256") && Contains("gpt2.bin"));
  spit(d + "/short.bin", llmc_shard(20240520, 1, 9, {1, 2}, 2));
  CHECK_THAT(open_error(d + "/short.bin"), Contains("field 'token count' = 9"));
  spit(d + "/version.bin", llmc_shard(20240520, 3, 1, {1}, 2));
  CHECK_THAT(open_error(d + "/version.bin"), Contains("field 'version' = 3"));
  spit(d + "/trunc.bin", llmc_shard(20240520, 1, 0, {}, 2).substr(0, 100));
  CHECK_THAT(open_error(d + "/trunc.bin"), Contains("truncated llm.c header"));
}

TEST_CASE("token file: hostile files are clear errors naming the file and field", "[data][tokens][hostile]") {
  const std::string d = tmp_dir("hostile"), good = d + "/good.rptok";
  const Sample s;
  write_token_file(good, 6, s.tokens, s.starts, s.vocab, s.channels, s.values);
  const std::string bytes = slurp(good);

  spit(d + "/empty", "");
  CHECK_THAT(open_error(d + "/empty"), Contains("is empty") && Contains(d + "/empty"));
  spit(d + "/trunc", bytes.substr(0, 40));
  CHECK_THAT(open_error(d + "/trunc"), Contains("truncated header"));
  spit(d + "/magic", "NOTTOKENS and more bytes to fill a header of eighty bytes.................................");
  CHECK_THAT(open_error(d + "/magic"), Contains("field 'magic'") && Contains("4e 4f 54 54"));
  {  // n_tokens far past the file end
    std::string b = bytes;
    const uint64_t n = uint64_t(1) << 40;
    std::memcpy(b.data() + 32, &n, 8);
    spit(d + "/count", b);
    CHECK_THAT(open_error(d + "/count"), Contains("field 'n_tokens' = 1099511627776 runs past the end"));
  }
  spit(d + "/cut", bytes.substr(0, bytes.size() - 8));
  CHECK_THAT(open_error(d + "/cut"), Contains("field 'channel 'label' values' = 3 runs past the end"));
  spit(d + "/trailing", bytes + "12345678");
  CHECK_THAT(open_error(d + "/trailing"), Contains("of trailing data"));
  {  // a flipped payload byte: the checksum
    std::string b = bytes;
    b[b.size() - 20] ^= 1;
    spit(d + "/flip", b);
    CHECK_THAT(open_error(d + "/flip"), Contains("field 'payload_crc32'"));
  }
  {  // a flipped header byte (the vocabulary strings): the header checksum
    std::string b = bytes;
    b[212] ^= 1;  // the first vocabulary string ('a'), inside the header
    spit(d + "/hflip", b);
    CHECK_THAT(open_error(d + "/hflip"), Contains("field 'header_crc32'"));
  }
  // Values outside what the header declares (the writer writes what it is given).
  write_token_file(d + "/chan.rptok", 6, s.tokens, s.starts, {}, s.channels,
                   {{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 9, 3}, {9, 0, 4}});
  CHECK_THAT(open_error(d + "/chan.rptok"), Contains("channel 'depth'[10] = 9 is outside its declared range [0, 7] (example 2, its token 3)"));
  write_token_file(d + "/tok.rptok", 6, {0, 1, 6, 2}, {0});
  CHECK_THAT(open_error(d + "/tok.rptok"), Contains("field 'tokens'[2] = 6 is outside the vocabulary [0, 6)"));
  write_token_file(d + "/dup.rptok", 2, {0, 1}, {0}, {"x", "x"});
  CHECK_THAT(open_error(d + "/dup.rptok"), Contains("vocabulary string 1 ('x') repeats"));

  CHECK_THAT(open_error(d), Contains("is a directory"));
  CHECK_THAT(open_error(d + "/missing"), Contains("cannot open"));
  // A FIFO with no writer: refused at once (opening it must not wait for a writer).
  REQUIRE(::mkfifo((d + "/fifo").c_str(), 0600) == 0);
  CHECK_THAT(open_error(d + "/fifo"), Contains("is a FIFO"));
  // A 10 GB sparse file: the good header, then a hole. Refused from the size alone (no read of
  // the hole: this finishes in well under the time reading 10 GB would take, and ctest's timeout
  // bounds it), and so is one that is all hole.
  {
    const std::string big = d + "/sparse";
    spit(big, bytes);
    REQUIRE(::truncate(big.c_str(), off_t(10) << 30) == 0);
    CHECK_THAT(open_error(big), Contains("the file has 10737418240") && Contains("of trailing data"));
    spit(big, "");
    REQUIRE(::truncate(big.c_str(), off_t(10) << 30) == 0);
    CHECK_THAT(open_error(big), Contains("field 'magic'") && Contains("00 00 00 00"));
  }
  fs::remove_all(d);
}

TEST_CASE("data.task tokens: the split is by example, and windows come from the right split", "[data][tokens]") {
  const std::string d = tmp_dir("split"), p = d + "/s.rptok";
  // 10 examples of 40 tokens; example e holds the token e (so every window names its example).
  std::vector<int64_t> toks;
  std::vector<uint64_t> starts;
  for (int e = 0; e < 10; ++e) {
    starts.push_back(toks.size());
    for (int t = 0; t < 40; ++t) toks.push_back(e);
  }
  write_token_file(p, 10, toks, starts);
  Config cfg = parse_config("data:\n  task: tokens\n  path: " + p + "\n  seq_len: 16\n  batch_size: 4\n  val_fraction: 0.2\n",
                            "test");
  auto ds = make_dataset(cfg);
  CHECK(ds->vocab_size() == 10);
  const std::vector<int64_t> val = ds->val_stream();
  CHECK(val == std::vector<int64_t>(toks.begin() + 320, toks.end()));  // the last 2 examples
  CHECK(ds->train_stream() == std::vector<int64_t>(toks.begin(), toks.begin() + 320));
  Generator g(3);
  for (int i = 0; i < 5; ++i) {
    for (int64_t v : ds->train_batch(g).input.to_vector<int64_t>()) CHECK(v < 8);
    for (int64_t v : ds->val_batch(i, 16).input.to_vector<int64_t>()) CHECK(v >= 8);
  }
  // No vocabulary strings: a prompt is token ids, output is ids.
  CHECK(ds->encode("3 4 5") == std::vector<int64_t>{3, 4, 5});
  CHECK(ds->decode({3, 4}) == "3 4");
  CHECK_THROWS_WITH(ds->encode("3 x"), Contains("'x' is not a token id"));
  // One example cannot be split by example.
  write_token_file(d + "/one.rptok", 10, toks, {0});
  cfg.data.path = d + "/one.rptok";
  CHECK_THROWS_WITH(make_dataset(cfg), Contains("holds 1 example") && Contains("data.val_path"));
}

TEST_CASE("data.tokenizer: a model file that is not a SentencePiece model is a clear error", "[data][tokens][subword]") {
  if (!subword_backend()) {
    WARN("built without SentencePiece: skipped");
    return;
  }
  const std::string d = tmp_dir("spbad");
  spit(d + "/text.txt", "one two\n\nthree four\n\nfive six\n\n");
  spit(d + "/bad.model", "this is not a model\n");
  const Config cfg = parse_config("data:\n  path: " + d + "/text.txt\n  seq_len: 2\n  tokenizer:\n    type: sentencepiece\n"
                                  "    model: " + d + "/bad.model\n",
                                  "test");
  CHECK_THROWS_WITH(make_dataset(cfg), Contains("bad.model") && Contains("not a SentencePiece model"));
  // An empty file, and a FIFO (refused before any read: reading it would wait for a writer).
  spit(d + "/empty.model", "");
  Config c2 = cfg;
  c2.data.tokenizer.model = d + "/empty.model";
  CHECK_THROWS_WITH(make_dataset(c2), Contains("empty.model' is empty: not a SentencePiece model"));
  REQUIRE(::mkfifo((d + "/fifo.model").c_str(), 0600) == 0);
  c2.data.tokenizer.model = d + "/fifo.model";
  CHECK_THROWS_WITH(make_dataset(c2), Contains("fifo.model") && Contains("not a readable regular file"));
  fs::remove_all(d);
}

namespace {
test::CliRun relpos_cli(const std::string& args) { return test::cli_run("--threads 1 " + args, 300); }
}  // namespace

TEST_CASE("cli: an llm.c shard pair written by scripts/prepare_llmc_shards.py trains with data.task tokens",
          "[cli][tokens][llmc][python]") {
  const std::string d = tmp_dir("llmc_cli");
  const test::CliRun w = test::shell_run("python3 " RELPOS_SOURCE_DIR "/scripts/prepare_llmc_shards.py " + d +
                                         "/toy --tokens 6000 --vocab 64");
  INFO(w.out);
  REQUIRE(w.code == 0);
  spit(d + "/c.yaml",
       "model: {kind: decoder, d_model: 32, n_layers: 1, n_heads: 2, d_ff: 64, max_len: 64, position: {type: alibi}}\n"
       "data: {task: tokens, path: " + d + "/toy_train_000000.bin, val_path: " + d + "/toy_val_000000.bin, "
       "shard_vocab: 64, seq_len: 16, batch_size: 8}\n"
       "optim: {lr: 1.0e-2, warmup: 5}\n"
       "train: {steps: 60, eval_every: 60, eval_batches: 4, log_every: 10, checkpoint_every: 60}\n"
       "output: {dir: " + d + "/run}\n");
  const test::CliRun v = relpos_cli("validate " + d + "/c.yaml");
  INFO(v.out);
  CHECK(v.code == 0);
  const test::CliRun r = relpos_cli("train " + d + "/c.yaml");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("(vocab 64)"));
  // Nine tokens in ten are the previous one plus 1: 60 steps take the validation loss well below a
  // uniform guess over 64 tokens (ln 64 = 4.16; the rule's own entropy is about 0.8).
  const test::CliRun e = relpos_cli("eval " + d + "/run --json");
  INFO(e.out);
  REQUIRE(e.code == 0);
  const auto at = e.out.find("\"loss\":");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(e.out.substr(at + 7)) < 2.5);
  // Sampling from the checkpoint alone (no shard at hand): the prompt and output are token ids.
  fs::remove(d + "/toy_train_000000.bin");
  const test::CliRun s = relpos_cli("sample " + d + "/run --prompt '1 2 3' --tokens 5 --temperature 0");
  INFO(s.out);
  CHECK(s.code == 0);
  CHECK_THAT(s.out, Contains("1 2 3 "));
  const test::CliRun e2 = relpos_cli("eval " + d + "/run");
  CHECK(e2.code == 2);
  CHECK_THAT(e2.out, Contains("is not readable here") && Contains("toy_train_000000.bin"));
  fs::remove_all(d);
}

TEST_CASE("cli: relpos data inspect shows a token file and refuses a FIFO at once", "[cli][tokens]") {
  const std::string d = tmp_dir("inspect_cli");
  const Sample s;
  write_token_file(d + "/s.rptok", 6, s.tokens, s.starts, s.vocab, s.channels, s.values);
  const test::CliRun r = relpos_cli("data inspect " + d + "/s.rptok --tokens 4");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("examples:    3 (lengths 3..5") && Contains("label") &&
                        Contains("declared [0, 9], values [0, 9]") && Contains("decoded:     \"abc \""));
  REQUIRE(::mkfifo((d + "/fifo").c_str(), 0600) == 0);
  const test::CliRun f = relpos_cli("data inspect " + d + "/fifo");
  CHECK(f.code == 1);
  CHECK_THAT(f.out, Contains("is a FIFO"));
  fs::remove_all(d);
}

TEST_CASE("cli: a SentencePiece run trains, resumes bit-exactly, and evaluates and samples from a copy of the run",
          "[cli][tokens][subword]") {
  if (!subword_backend()) {
    WARN("built without SentencePiece: skipped");
    return;
  }
  const std::string d = tmp_dir("subword_cli");
  const std::string small = " --set model.d_model=32 --set model.d_ff=64 --set model.n_layers=1 --set train.steps=4"
                            " --set train.checkpoint_every=2 --set train.keep_last=0 --set train.eval_every=2"
                            " --set train.eval_batches=1 --set optim.warmup=1 --set data.tokenizer.vocab_size=256";
  // Trained where the text is data/shakespeare.txt (relative): elsewhere that path does not exist.
  const std::string cfg = RELPOS_SOURCE_DIR "/configs/subword_t5.yaml";
  fs::create_directories(d + "/data");
  fs::copy_file(RELPOS_SOURCE_DIR "/data/tinyshakespeare.txt", d + "/data/shakespeare.txt");
  auto here = [&](const std::string& args) {
    return test::shell_run("cd " + d + " && " RELPOS_CLI_PATH " --threads 1 " + args + small +
                           " --set data.path=data/shakespeare.txt");
  };
  const test::CliRun a = here("train " + cfg + " --set output.dir=a");
  INFO(a.out);
  REQUIRE(a.code == 0);
  CHECK_THAT(a.out, Contains("(vocab 256)"));
  CHECK(TokenFile(d + "/a/data/tokens.rptok").info().vocab_size == 256);
  // Resume from step 2 in a copy: the same bits at step 4 (the tokenizer comes from the checkpoint,
  // the tokens from the run's cache).
  fs::copy(d + "/a", d + "/b", fs::copy_options::recursive);
  fs::remove_all(d + "/b/checkpoints/step_00000004");
  const test::CliRun b = here("train " + cfg + " --resume b/checkpoints/step_00000002");
  INFO(b.out);
  REQUIRE(b.code == 0);
  CHECK(slurp(d + "/a/checkpoints/step_00000004/model.safetensors") ==
        slurp(d + "/b/checkpoints/step_00000004/model.safetensors"));
  // Another place without the text or the model file: data.path names a file that is not there.
  const std::string c = d + "/elsewhere/run";
  fs::create_directories(d + "/elsewhere");
  fs::copy(d + "/a", c, fs::copy_options::recursive);
  {
    std::string y = slurp(c + "/checkpoints/step_00000004/trainer_state.json");
    CHECK_THAT(y, Contains("model_base64") && Contains("sentencepiece"));
  }
  const test::CliRun e = test::shell_run("cd " + d + "/elsewhere && " RELPOS_CLI_PATH " --threads 1 eval run --mode sliding");
  INFO(e.out);
  CHECK(e.code == 0);
  CHECK_THAT(e.out, Contains("mode sliding window"));
  fs::remove_all(c + "/data");  // the checkpoint alone: sampling still encodes and decodes text
  const test::CliRun s =
      test::shell_run("cd " + d + "/elsewhere && " RELPOS_CLI_PATH " --threads 1 sample run --prompt 'ROMEO:' --tokens 20");
  INFO(s.out);
  CHECK(s.code == 0);
  CHECK_THAT(s.out, Contains("ROMEO:"));
  fs::remove_all(d);
}

TEST_CASE("data.task token_labels: an encoder learns per-example labels from the label channel",
          "[cli][tokens][labels]") {
  const std::string d = tmp_dir("labels");
  // 400 examples of 11 tokens from {1, 2}; the label is the majority token (chance: 0.5).
  std::vector<int64_t> toks;
  std::vector<uint64_t> starts;
  std::vector<int32_t> labels;
  Generator g(7);
  for (int e = 0; e < 400; ++e) {
    starts.push_back(toks.size());
    int ones = 0;
    for (int t = 0; t < 11; ++t) {
      const int64_t v = 1 + int64_t(g.next_u64() % 2);
      ones += v == 1;
      toks.push_back(v);
    }
    labels.push_back(ones > 5 ? 1 : 2);
  }
  write_token_file(d + "/maj.rptok", 3, toks, starts, {}, {{"label", ChannelScope::Example, 1, 2}}, {labels});
  spit(d + "/c.yaml",
       "model: {kind: encoder, d_model: 32, n_layers: 1, n_heads: 2, d_ff: 64, max_len: 16}\n"
       "data: {task: token_labels, path: " + d + "/maj.rptok, seq_len: 12, batch_size: 16, val_fraction: 0.2}\n"
       "optim: {lr: 1.0e-2, warmup: 10}\n"
       "train: {steps: 150, eval_every: 150, eval_batches: 8, log_every: 50, checkpoint_every: 150}\n"
       "output: {dir: " + d + "/run}\n");
  const test::CliRun r = relpos_cli("train " + d + "/c.yaml");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const test::CliRun e = relpos_cli("eval " + d + "/run --json");
  INFO(e.out);
  REQUIRE(e.code == 0);
  const auto at = e.out.find("\"accuracy\":");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(e.out.substr(at + 11)) > 0.75);
  // A file without a label channel, and labels past the output size: clear errors.
  write_token_file(d + "/nolabel.rptok", 3, toks, starts);
  const test::CliRun n = relpos_cli("validate " + d + "/c.yaml --set data.path=" + d + "/nolabel.rptok");
  CHECK(n.code == 2);
  CHECK_THAT(n.out, Contains("has no channel named 'label'"));
  write_token_file(d + "/big.rptok", 3, toks, starts, {}, {{"label", ChannelScope::Example, 0, 5}}, {labels});
  const test::CliRun b = relpos_cli("train " + d + "/c.yaml --overwrite --set data.path=" + d + "/big.rptok");
  CHECK(b.code == 2);
  CHECK_THAT(b.out, Contains("channel 'label' declares the range [0, 5]"));
  fs::remove_all(d);
}

TEST_CASE("data/: the shipped llm.c toy shards are what scripts/prepare_llmc_shards.py writes", "[tokens][python]") {
  const std::string d = tmp_dir("shipped");
  const test::CliRun w =
      test::shell_run("python3 " RELPOS_SOURCE_DIR "/scripts/prepare_llmc_shards.py " + d + "/llmc_toy");
  INFO(w.out);
  REQUIRE(w.code == 0);
  for (const char* f : {"llmc_toy_train_000000.bin", "llmc_toy_val_000000.bin"}) {
    INFO(f << ": regenerate with scripts/prepare_llmc_shards.py data/llmc_toy");
    const std::string shipped = slurp(std::string(RELPOS_SOURCE_DIR "/data/") + f);
    CHECK(!shipped.empty());
    CHECK(shipped == slurp(d + "/" + f));
  }
  fs::remove_all(d);
}
