// Checkpoint I/O: safetensors files (golden bytes written out by hand, round trips, every
// kind of corruption is a relpos::Error naming the file), atomic checkpoint directories
// (round trip, failed saves, crash leftovers, pruning) and the metrics writer (JSONL/CSV
// contents, new columns, resume truncation).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "autograd/ops.h"
#include "core/error.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "trainers/io/checkpoint.h"
#include "trainers/metrics.h"
#include "trainers/io/safetensors.h"

using namespace relpos;
namespace fs = std::filesystem;

namespace {

// A fresh, empty directory under the system temp dir, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("relpos-test-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string u64le(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
  return s;
}

// A safetensors file from a literal header (padded here unless pad = false) and data bytes.
std::string st_file(std::string header, const std::string& data, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  return u64le(header.size()) + header + data;
}

std::string hex_bytes(const std::string& s) {
  std::string out;
  char buf[4];
  for (unsigned char c : s) {
    std::snprintf(buf, sizeof buf, "%02x ", c);
    out += buf;
  }
  return out;
}

// Exact equality of two tensors: names, dtypes, shapes and every bit of the values.
void require_same(const NamedTensors& a, const NamedTensors& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << i << " '" << a[i].first << "'");
    REQUIRE(a[i].first == b[i].first);
    const Tensor &x = a[i].second, &y = b[i].second;
    REQUIRE(x.dtype() == y.dtype());
    REQUIRE(x.shape() == y.shape());
    Tensor cx = x.contiguous(), cy = y.contiguous();
    size_t n = size_t(x.numel()) * dtype_size(x.dtype());
    REQUIRE(std::memcmp(cx.raw_data(), cy.raw_data(), n) == 0);
  }
}

// The error message of reading `path`, or "" when it reads fine; any other exception fails.
std::string read_error(const std::string& path) {
  try {
    read_safetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

NamedTensors two_tensors() {
  return {{"a", Tensor::from_vector<float>({1.0f, -2.0f}, {2})},
          {"b", Tensor::from_vector<int64_t>({7}, {1})}};
}

// The golden file of two_tensors(), byte by byte.
std::string two_tensors_golden() {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  REQUIRE(header.size() == 108);  // -> 4 spaces of padding, N = 112 = 0x70
  std::string bytes;
  bytes += std::string("\x70\x00\x00\x00\x00\x00\x00\x00", 8);
  bytes += header + "    ";
  bytes += std::string("\x00\x00\x80\x3f", 4);  // 1.0f
  bytes += std::string("\x00\x00\x00\xc0", 4);  // -2.0f
  bytes += std::string("\x07\x00\x00\x00\x00\x00\x00\x00", 8);  // int64 7
  REQUIRE(bytes.size() == 136);
  return bytes;
}

}  // namespace

// ------------------------------------------------------------------ safetensors: golden

TEST_CASE("safetensors: golden bytes of a two-tensor file (F32 [2], I64 [1])", "[checkpoint]") {
  TempDir dir("st-golden");
  const std::string path = dir.file("two.safetensors");
  write_safetensors(path, two_tensors());
  const std::string got = slurp(path), want = two_tensors_golden();
  INFO("got  " << hex_bytes(got) << "\nwant " << hex_bytes(want));
  REQUIRE(got == want);
  REQUIRE(serialize_safetensors(two_tensors()) == want);
  REQUIRE_FALSE(fs::exists(path + ".tmp"));
  require_same(read_safetensors(path), two_tensors());
}

TEST_CASE("safetensors: golden bytes of the reference implementation's test vectors", "[checkpoint]") {
  // huggingface/safetensors tensor.rs test_empty: an empty dict is "{}" padded to 8.
  REQUIRE(serialize_safetensors({}) == std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  // ... and with metadata {"framework": "pt"}: 35 bytes of JSON + 5 spaces, N = 40.
  REQUIRE(serialize_safetensors({}, {{"framework", "pt"}}) ==
          std::string("\x28\0\0\0\0\0\0\0", 8) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
  // test_serialization: "attn.0" F32 [1, 2, 3] = 0..5, N = 64 (no padding), 24 data bytes.
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  std::string want = std::string("\x40\0\0\0\0\0\0\0", 8) +
                     R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})" +
                     std::string("\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40"
                                 "\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40", 24);
  REQUIRE(serialize_safetensors({{"attn.0", t}}) == want);
  TempDir dir("st-ref");
  spit(dir.file("ref.safetensors"), want);
  require_same(read_safetensors(dir.file("ref.safetensors")), {{"attn.0", t}});
}

TEST_CASE("safetensors: reads a file written by an independent Python writer", "[checkpoint]") {
  // tests/fixtures/safetensors_python.safetensors comes from tools/safetensors_py.py: the
  // reference writer's layout (descending alignment, then name) and json.dumps spacing.
  std::map<std::string, std::string> md;
  NamedTensors got = read_safetensors(RELPOS_SOURCE_DIR "/tests/fixtures/safetensors_python.safetensors", &md);
  NamedTensors want = {{"ids", Tensor::from_vector<int64_t>({-1, 0, int64_t(1) << 40}, {3})},
                       {"pi", Tensor::scalar(3.141592653589793, DType::F64)},
                       {"e", Tensor::zeros({0}, DType::F32)},
                       {"w", Tensor::from_vector<float>({0.5f, -1.5f, 3.25f, 0.001f}, {2, 2})}};
  require_same(got, want);  // in data order
  REQUIRE(md == std::map<std::string, std::string>{{"framework", "python-struct"},
                                                   {"note", "written by tools/safetensors_py.py"}});
}

// ------------------------------------------------------------------ safetensors: round trips

TEST_CASE("safetensors: round trip of F32/F64/I64, 0-d, empty and strided tensors with metadata",
          "[checkpoint]") {
  Generator g(5);
  Tensor m = Tensor::randn({3, 4}, g, DType::F32);
  NamedTensors in = {
      {"z.last_name_first", Tensor::randn({2, 3}, g, DType::F64)},
      {"empty.start", Tensor::zeros({0}, DType::F32)},
      {"a.f32", Tensor::randn({5}, g, DType::F32)},
      {"scalar.i64", Tensor::scalar(-123456789012345.0, DType::I64)},
      {"scalar.f64", Tensor::scalar(std::nextafter(1.0, 2.0), DType::F64)},
      {"empty.mid", Tensor::zeros({3, 0, 2}, DType::I64)},
      {"empty.mid2", Tensor::zeros({0, 7}, DType::F64)},
      {"transposed", m.transpose(0, 1)},  // non-contiguous: written as a contiguous copy
      {"specials", Tensor::from_vector<float>({std::numeric_limits<float>::infinity(), -0.0f,
                                               std::numeric_limits<float>::denorm_min(),
                                               std::numeric_limits<float>::quiet_NaN()}, {4})},
      {"i64.extremes", Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::min(),
                                                     std::numeric_limits<int64_t>::max(), -1}, {3})},
      {"unicode.é", Tensor::ones({1, 1}, DType::F32)},
      {"empty.end", Tensor::zeros({0}, DType::F64)},
  };
  std::map<std::string, std::string> md = {{"step", "42"}, {"note", "a \"quoted\" value, ok"}};
  TempDir dir("st-roundtrip");
  const std::string path = dir.file("rt.safetensors");
  write_safetensors(path, in, md);
  std::map<std::string, std::string> md_out = {{"stale", "x"}};
  NamedTensors out = read_safetensors(path, &md_out);
  require_same(out, in);  // same order as written, including the empty tensors
  REQUIRE(md_out == md);
  // data: 48 (z) + 20 (a) + 8 + 8 (scalars) + 48 (transposed) + 16 + 24 + 4 = 176 bytes;
  // what is left besides the 8-byte length is the header, padded to a multiple of 8.
  REQUIRE((slurp(path).size() - 8 - 176) % 8 == 0);
  // Without metadata, a metadata map comes back empty.
  write_safetensors(path, in);
  read_safetensors(path, &md_out);
  REQUIRE(md_out.empty());
  // Overwriting a file replaces it; an empty tensor set is a valid file.
  write_safetensors(path, {});
  REQUIRE(read_safetensors(path).empty());
}

TEST_CASE("safetensors: the writer rejects bad names and undefined tensors before creating a file",
          "[checkpoint]") {
  TempDir dir("st-writer");
  const std::string path = dir.file("w.safetensors");
  Tensor t = Tensor::ones({2});
  auto fails = [&](const NamedTensors& ts, const std::string& what) {
    REQUIRE_THROWS_WITH(write_safetensors(path, ts), Catch::Contains(what) && Catch::Contains(path));
    REQUIRE_FALSE(fs::exists(path));
    REQUIRE_FALSE(fs::exists(path + ".tmp"));
  };
  fails({{"x", t}, {"x", t}}, "duplicate tensor name 'x'");
  fails({{"", t}}, "empty name");
  fails({{"__metadata__", t}}, "reserved");
  fails({{"x", t}, {"u", Tensor()}}, "tensor 'u' is undefined");
  fails({{std::string("bad\xff", 4), t}}, "UTF-8");
  REQUIRE_THROWS_WITH(write_safetensors(dir.file("no/such/dir/w.safetensors"), {{"x", t}}),
                      Catch::Contains("no/such/dir/w.safetensors"));
}

// ------------------------------------------------------------------ safetensors: corruption

TEST_CASE("safetensors: a file truncated at any point is an Error naming the file", "[checkpoint]") {
  TempDir dir("st-trunc");
  const std::string path = dir.file("cut.safetensors");
  const std::string full = two_tensors_golden();
  for (size_t len = 0; len < full.size(); ++len) {
    spit(path, full.substr(0, len));
    INFO("truncated to " << len << " bytes");
    std::string msg = read_error(path);
    REQUIRE_THAT(msg, Catch::Contains("safetensors file '" + path + "'"));
    if (len < 8) REQUIRE_THAT(msg, Catch::Contains("too short"));
    else if (len < 8 + 112) REQUIRE_THAT(msg, Catch::Contains("runs past the end of the file"));
    else REQUIRE_THAT(msg, Catch::Contains("past the end of the data buffer"));
  }
  // One byte too many is an uncovered buffer.
  spit(path, full + "x");
  REQUIRE_THAT(read_error(path), Catch::Contains("cover 16 bytes but the data buffer is 17"));
}

TEST_CASE("safetensors: corrupted headers are Errors naming the file and the problem", "[checkpoint]") {
  TempDir dir("st-corrupt");
  const std::string path = dir.file("bad.safetensors");
  const std::string d8(8, '\0'), d12(12, '\0'), d16(16, '\0');
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"header length u64 max", u64le(~0ull) + std::string(16, ' '), "absurd"},
      {"header length 2^40", u64le(1ull << 40) + "{}      ", "absurd"},
      {"header length just over the limit", u64le(100'000'001) + "{}      ", "absurd"},
      {"header length past the file", u64le(64) + "{}      ", "runs past the end of the file"},
      {"header length 0", u64le(0) + "{}      ", "header length is 0"},
      {"not JSON", st_file("{not json}", ""), "not valid JSON"},
      {"trailing garbage", st_file("{} x", ""), "not valid JSON"},
      {"NUL padding", st_file(std::string("{}\0\0\0\0\0\0", 8), "", false), "not valid JSON"},
      {"NUL then garbage", st_file(std::string("{}\0garbage", 10), ""), "a NUL byte at header offset 2"},
      {"invalid UTF-8", st_file("{\"\xff\xfe\":{}}", ""), "not valid JSON"},
      {"not an object", st_file("[1,2]", ""), "does not start with '{'"},
      {"duplicate tensor", st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16),
       "the key \"a\" twice"},
      {"duplicate field", st_file(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d8),
       "the key \"dtype\" twice"},
      {"entry not an object", st_file(R"({"a":[1]})", ""), "entry 'a' is not an object"},
      {"missing dtype", st_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", d8), "entry 'a' has no \"dtype\""},
      {"missing shape", st_file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", d8), "has no \"shape\""},
      {"missing offsets", st_file(R"({"a":{"dtype":"F32","shape":[2]}})", d8), "has no \"data_offsets\""},
      {"extra key", st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", d8),
       "unexpected key \"x\""},
      {"unknown dtype", st_file(R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", d8),
       "unknown dtype \"F99\""},
      {"unsupported dtype", st_file(R"({"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})", d8),
       "dtype BF16 is not supported"},
      {"dtype not a string", st_file(R"({"a":{"dtype":3,"shape":[2],"data_offsets":[0,8]}})", d8),
       "dtype is not a string"},
      {"negative dim", st_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8),
       "non-negative integers"},
      {"fractional dim", st_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", d8),
       "non-negative integers"},
      {"shape not an array", st_file(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", d8),
       "shape is not an array"},
      {"huge shape", st_file(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})", d8),
       "is too large"},
      {"huge shape with a zero", st_file(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904,0],"data_offsets":[0,0]}})", ""),
       "is too large"},
      {"dim beyond int64", st_file(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})", d8),
       "non-negative integers"},
      {"byte count mismatch", st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0')),
       "span 4 bytes, but F32 [2] needs 8"},
      {"end before begin", st_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", d8),
       "end before they begin"},
      {"three offsets", st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", d8),
       "must be two non-negative integers"},
      {"negative offset", st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", d8),
       "must be two non-negative integers"},
      {"offsets out of the file", st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d8),
       "point past the end of the data buffer (8 bytes)"},
      {"offsets far out of the file", st_file(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[18446744073709551600,18446744073709551608]}})", d8),
       "must be two non-negative integers"},
      {"overlap", st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", d12),
       "entry 'b': data_offsets [4, 12] overlap entry 'a'"},
      {"gap", st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", d12),
       "bytes [4, 8) of the data buffer belong to no tensor"},
      {"not starting at 0", st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8),
       "bytes [0, 4) of the data buffer belong to no tensor"},
      {"buffer not covered", st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", d8),
       "the tensors cover 4 bytes but the data buffer is 8 bytes"},
      {"data without tensors", st_file("{}", d8), "the tensors cover 0 bytes but the data buffer is 8"},
      {"metadata not an object", st_file(R"({"__metadata__":"x"})", ""), "\"__metadata__\" is not an object"},
      {"metadata value not a string", st_file(R"({"__metadata__":{"step":3}})", ""),
       "\"__metadata__\" value of \"step\" is not a string"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    spit(path, c.bytes);
    std::string msg = read_error(path);
    REQUIRE_THAT(msg, Catch::Contains("safetensors file '" + path + "'") && Catch::Contains(c.expect));
  }
  // A header nested a million levels deep is parsed without recursion and rejected.
  spit(path, st_file("{\"a\":" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}", ""));
  REQUIRE_THAT(read_error(path), Catch::Contains("entry 'a' is not an object"));
  // Not a file at all.
  REQUIRE_THAT(read_error(dir.file("missing.safetensors")), Catch::Contains("missing.safetensors': no such file"));
  REQUIRE_THAT(read_error(dir.path.string()), Catch::Contains("not a regular file"));
}

TEST_CASE("safetensors: flipping any bit pattern of any header byte is never a crash", "[checkpoint]") {
  TempDir dir("st-flip");
  const std::string path = dir.file("flip.safetensors");
  const std::string full = two_tensors_golden();
  int ok = 0, errors = 0;
  for (size_t pos = 0; pos < 8 + 112; ++pos) {
    for (unsigned char mask : {0x01, 0x02, 0x10, 0x20, 0x80, 0xff}) {
      std::string bytes = full;
      bytes[pos] = char(bytes[pos] ^ mask);
      spit(path, bytes);
      INFO("byte " << pos << " ^ " << int(mask));
      std::string msg = read_error(path);  // never another exception type, never UB (ASan/UBSan)
      if (msg.empty()) {
        ++ok;  // e.g. a renamed tensor
      } else {
        ++errors;
        REQUIRE_THAT(msg, Catch::Contains(path));
      }
    }
  }
  REQUIRE(errors > ok);
}

// ------------------------------------------------------------------ checkpoints

namespace {

struct TinyTraining {
  Generator gen{11};
  nn::Linear model{3, 2, true, gen};
  nn::optim::AdamW opt{model.parameters(), nn::optim::AdamOptions{}};

  void steps(int n) {
    for (int i = 0; i < n; ++i) {
      Variable x(Tensor::randn({4, 3}, gen));
      Variable loss = mean(model.forward(x) * model.forward(x));
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
  Checkpoint checkpoint(int64_t step) const {
    Checkpoint c;
    c.model = model.state_dict();
    c.optimizer = opt.state_dict();
    GeneratorState s = gen.state();
    c.state = {{"step", step},
               {"rng", {{"seed", s.seed}, {"offset", s.offset}}},
               {"data_position", 1234},
               {"config", "model: linear\nlr: 1e-3\n"}};
    return c;
  }
};

void require_same_checkpoint(const Checkpoint& a, const Checkpoint& b) {
  require_same(a.model, b.model);
  require_same(a.optimizer, b.optimizer);
  REQUIRE(a.state == b.state);
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("checkpoint: save/load round trip restores model, Adam state and trainer state", "[checkpoint]") {
  TempDir dir("ckpt-roundtrip");
  const std::string run = dir.path.string();
  REQUIRE_FALSE(latest_checkpoint(run).has_value());
  TinyTraining a;
  a.steps(3);
  Checkpoint saved = a.checkpoint(42);
  std::string path = save_checkpoint(run, 42, saved, /*keep_last=*/3);
  REQUIRE(path == (dir.path / "checkpoints" / "step_00000042").string());
  REQUIRE(path == checkpoint_dir(run, 42));
  REQUIRE(entries(path) == std::vector<std::string>{"model.safetensors", "optimizer.safetensors",
                                                    "trainer_state.json"});
  REQUIRE(entries(dir.path / "checkpoints") == std::vector<std::string>{"step_00000042"});
  REQUIRE(latest_checkpoint(run) == path);
  std::map<std::string, std::string> md;
  read_safetensors(path + "/model.safetensors", &md);
  REQUIRE(md == std::map<std::string, std::string>{{"format", "relpos-checkpoint"}, {"step", "42"}});

  Checkpoint loaded = load_checkpoint(path);
  require_same_checkpoint(loaded, saved);
  // The optimizer's int64 0-d step counters came back as such.
  bool found_step = false;
  for (const auto& [k, t] : loaded.optimizer)
    if (k.size() > 5 && k.substr(k.size() - 5) == ".step") {
      found_step = true;
      REQUIRE(t.dtype() == DType::I64);
      REQUIRE(t.dim() == 0);
      REQUIRE(t.item() == 3);
    }
  REQUIRE(found_step);

  // Resume: a fresh model + optimizer loaded from the checkpoint continues bit-identically.
  TinyTraining b;
  b.model.load_state_dict(loaded.model);
  b.opt.load_state_dict(loaded.optimizer);
  b.gen.set_state({loaded.state["rng"]["seed"].get<uint64_t>(), loaded.state["rng"]["offset"].get<uint64_t>()});
  a.steps(2);
  b.steps(2);
  require_same(b.model.state_dict(), a.model.state_dict());
  require_same(b.opt.state_dict(), a.opt.state_dict());
}

TEST_CASE("checkpoint: a failed save leaves the previous checkpoint intact", "[checkpoint]") {
  TempDir dir("ckpt-fail");
  const std::string run = dir.path.string();
  TinyTraining t;
  t.steps(1);
  Checkpoint good = t.checkpoint(100);
  const std::string p100 = save_checkpoint(run, 100, good, 0);

  SECTION("an undefined optimizer tensor fails after model.safetensors was written") {
    Checkpoint bad = good;
    bad.optimizer.emplace_back("broken", Tensor());
    REQUIRE_THROWS_WITH(save_checkpoint(run, 200, bad, 1),
                        Catch::Contains("step_00000200") && Catch::Contains("tensor 'broken' is undefined"));
  }
  SECTION("trainer state that cannot be encoded fails after both tensor files were written") {
    Checkpoint bad = good;
    bad.state["note"] = std::string("\xff\xfe", 2);
    REQUIRE_THROWS_WITH(save_checkpoint(run, 200, bad, 1), Catch::Contains("trainer_state.json"));
  }
  SECTION("a duplicate model key") {
    Checkpoint bad = good;
    bad.model.push_back(bad.model.front());
    REQUIRE_THROWS_WITH(save_checkpoint(run, 200, bad, 1), Catch::Contains("duplicate tensor name"));
  }
  SECTION("re-saving the same step fails: the old step_00000100 is not replaced") {
    Checkpoint bad = good;
    bad.optimizer.emplace_back("broken", Tensor());
    REQUIRE_THROWS_AS(save_checkpoint(run, 100, bad, 1), Error);
  }
  // Whatever failed: no step_00000200, no temporary left, the old checkpoint loads unchanged
  // and is still the latest.
  REQUIRE(entries(dir.path / "checkpoints") == std::vector<std::string>{"step_00000100"});
  REQUIRE(latest_checkpoint(run) == p100);
  require_same_checkpoint(load_checkpoint(p100), good);
}

TEST_CASE("checkpoint: a crashed save's .tmp directory is ignored, then cleaned by the next save",
          "[checkpoint]") {
  TempDir dir("ckpt-crash");
  const std::string run = dir.path.string();
  TinyTraining t;
  const std::string p100 = save_checkpoint(run, 100, t.checkpoint(100), 0);
  // A crash in the middle of saving step 300: a partial temporary directory.
  const fs::path leftover = dir.path / "checkpoints" / ".tmp-step_00000300";
  fs::create_directories(leftover);
  spit((leftover / "model.safetensors").string(), two_tensors_golden().substr(0, 50));
  fs::create_directories(dir.path / "checkpoints" / ".tmp-old-step_00000100");
  // Other names are not checkpoints either.
  fs::create_directories(dir.path / "checkpoints" / "step_12x");
  spit((dir.path / "checkpoints" / "step_00000999").string(), "a file, not a directory");

  REQUIRE(latest_checkpoint(run) == p100);
  REQUIRE(list_checkpoints(run).size() == 1);
  const std::string p200 = save_checkpoint(run, 200, t.checkpoint(200), 0);
  REQUIRE_FALSE(fs::exists(leftover));
  REQUIRE_FALSE(fs::exists(dir.path / "checkpoints" / ".tmp-old-step_00000100"));
  REQUIRE(latest_checkpoint(run) == p200);
  REQUIRE(list_checkpoints(run) ==
          std::vector<std::pair<int64_t, std::string>>{{100, p100}, {200, p200}});
}

TEST_CASE("checkpoint: keep_last prunes older checkpoints, never newer ones", "[checkpoint]") {
  TempDir dir("ckpt-prune");
  const std::string run = dir.path.string();
  TinyTraining t;
  auto steps = [&] {
    std::vector<int64_t> s;
    for (auto& [step, _] : list_checkpoints(run)) s.push_back(step);
    return s;
  };
  for (int64_t s : {10, 20, 30}) save_checkpoint(run, s, t.checkpoint(s), 0);  // keep all
  REQUIRE(steps() == std::vector<int64_t>{10, 20, 30});
  save_checkpoint(run, 40, t.checkpoint(40), -1);  // negative: keep all too
  REQUIRE(steps() == std::vector<int64_t>{10, 20, 30, 40});
  save_checkpoint(run, 50, t.checkpoint(50), 2);
  REQUIRE(steps() == std::vector<int64_t>{40, 50});
  // Resumed from step 40 (say), saving 45: step 50 is newer and is left alone; of the steps
  // <= 45 the newest keep_last stay.
  save_checkpoint(run, 45, t.checkpoint(45), 1);
  REQUIRE(steps() == std::vector<int64_t>{45, 50});
  // Steps beyond 8 digits sort numerically.
  save_checkpoint(run, 123456789, t.checkpoint(123456789), 0);
  REQUIRE(latest_checkpoint(run) == (dir.path / "checkpoints" / "step_123456789").string());
  save_checkpoint(run, 123456790, t.checkpoint(123456790), 1);
  REQUIRE(steps() == std::vector<int64_t>{123456790});
  REQUIRE_THROWS_WITH(save_checkpoint(run, -1, t.checkpoint(0), 0), Catch::Contains("step must be >= 0"));
}

TEST_CASE("checkpoint: saving an existing step again replaces it", "[checkpoint]") {
  TempDir dir("ckpt-replace");
  const std::string run = dir.path.string();
  TinyTraining t;
  save_checkpoint(run, 7, t.checkpoint(7), 0);
  t.steps(2);
  Checkpoint second = t.checkpoint(7);
  second.state["note"] = "second";
  const std::string p = save_checkpoint(run, 7, second, 0);
  require_same_checkpoint(load_checkpoint(p), second);
  REQUIRE(entries(dir.path / "checkpoints") == std::vector<std::string>{"step_00000007"});
}

TEST_CASE("checkpoint: load errors name the path and what is wrong", "[checkpoint]") {
  TempDir dir("ckpt-load");
  const std::string run = dir.path.string();
  TinyTraining t;
  const std::string p = save_checkpoint(run, 1, t.checkpoint(1), 0);
  const std::string model = p + "/model.safetensors", state = p + "/trainer_state.json";

  REQUIRE_THROWS_WITH(load_checkpoint(run + "/checkpoints/step_00000002"),
                      Catch::Contains("step_00000002' does not exist"));
  REQUIRE_THROWS_WITH(load_checkpoint(model), Catch::Contains("is not a directory"));

  const std::string model_bytes = slurp(model), state_bytes = slurp(state);
  spit(model, model_bytes.substr(0, model_bytes.size() - 3));
  REQUIRE_THROWS_WITH(load_checkpoint(p), Catch::Contains(model) && Catch::Contains("past the end"));
  spit(model, model_bytes);

  spit(state, "{\"step\": 1,");
  REQUIRE_THROWS_WITH(load_checkpoint(p), Catch::Contains(state) && Catch::Contains("not valid JSON"));
  spit(state, state_bytes);

  fs::remove(p + "/optimizer.safetensors");
  REQUIRE_THROWS_WITH(load_checkpoint(p), Catch::Contains(p) && Catch::Contains("optimizer.safetensors is missing"));
}

// ------------------------------------------------------------------ metrics

TEST_CASE("metrics: JSONL and CSV contents, arrays spread over columns", "[checkpoint][metrics]") {
  TempDir dir("metrics-basic");
  {
    MetricsWriter w(dir.path.string());
    w.log(1, {{"loss", 2.5}, {"lr", 0.001}, {"tag", "warm,up \"a\""}, {"clipped", true},
              {"grad_norm", {0.5, 1.25}}});
    w.log(2, {{"loss", 2.0}, {"lr", 0.002}, {"tag", "x"}, {"clipped", false}, {"grad_norm", {0.25, 1}}});
    // Contents are flushed as soon as a row is logged.
    REQUIRE(slurp(w.jsonl_path()) ==
            "{\"step\":1,\"loss\":2.5,\"lr\":0.001,\"tag\":\"warm,up \\\"a\\\"\",\"clipped\":true,"
            "\"grad_norm\":[0.5,1.25]}\n"
            "{\"step\":2,\"loss\":2.0,\"lr\":0.002,\"tag\":\"x\",\"clipped\":false,\"grad_norm\":[0.25,1]}\n");
    REQUIRE(slurp(w.csv_path()) ==
            "step,loss,lr,tag,clipped,grad_norm.0,grad_norm.1\n"
            "1,2.5,0.001,\"warm,up \"\"a\"\"\",true,0.5,1.25\n"
            "2,2.0,0.002,x,false,0.25,1\n");
    // Missing keys leave empty cells; non-finite numbers become "nan"/"inf"/"-inf".
    w.log(3, {{"loss", std::nan("")}, {"grad_norm", {std::numeric_limits<double>::infinity(),
                                                      -std::numeric_limits<double>::infinity()}}});
    std::string jsonl = slurp(w.jsonl_path());
    REQUIRE_THAT(jsonl, Catch::EndsWith("{\"step\":3,\"loss\":\"nan\",\"grad_norm\":[\"inf\",\"-inf\"]}\n"));
    REQUIRE_THAT(slurp(w.csv_path()), Catch::EndsWith("2,2.0,0.002,x,false,0.25,1\n3,nan,,,,inf,-inf\n"));
  }
}

TEST_CASE("metrics: a row with a new key rewrites the CSV with the extended header", "[checkpoint][metrics]") {
  TempDir dir("metrics-newkey");
  MetricsWriter w(dir.path.string());
  w.log(10, {{"loss", 1}});
  w.log(10, {{"val_loss", 3}});         // an eval row at the same step: new column
  w.log(20, {{"loss", 0.5}, {"acts", {1, 2, 3}}});
  w.log(30, {{"loss", 0.25}, {"acts", {4, 5}}});  // shorter array: empty last cell
  REQUIRE(w.csv_columns() == std::vector<std::string>{"step", "loss", "val_loss", "acts.0", "acts.1", "acts.2"});
  REQUIRE(slurp(w.csv_path()) ==
          "step,loss,val_loss,acts.0,acts.1,acts.2\n"
          "10,1,,,,\n"
          "10,,3,,,\n"
          "20,0.5,,1,2,3\n"
          "30,0.25,,4,5,\n");
  REQUIRE(w.last_step() == 30);
}

TEST_CASE("metrics: reopening appends, resume_from_step drops later rows", "[checkpoint][metrics]") {
  TempDir dir("metrics-resume");
  const std::string run = dir.path.string();
  {
    MetricsWriter w(run);
    for (int s = 1; s <= 5; ++s) w.log(s, {{"loss", 10 - s}});
  }
  {
    MetricsWriter w(run);  // plain reopen: append
    REQUIRE(w.last_step() == 5);
    w.log(6, {{"loss", 4}});
    REQUIRE_THROWS_WITH(w.log(3, {{"loss", 1}}), Catch::Contains("step 3 logged after step 6"));
  }
  {
    // A crash cut the last line short.
    std::ofstream(dir.file("metrics.jsonl"), std::ios::app) << "{\"step\":7,\"lo";
    MetricsWriter w(run, MetricsOptions{.resume_from_step = 3});
    REQUIRE(w.last_step() == 3);
    w.log(4, {{"loss", 7.5}, {"lr", 0.1}});
  }
  REQUIRE(slurp(dir.file("metrics.jsonl")) ==
          "{\"step\":1,\"loss\":9}\n{\"step\":2,\"loss\":8}\n{\"step\":3,\"loss\":7}\n"
          "{\"step\":4,\"loss\":7.5,\"lr\":0.1}\n");
  REQUIRE(slurp(dir.file("metrics.csv")) == "step,loss,lr\n1,9,\n2,8,\n3,7,\n4,7.5,0.1\n");
  {
    // The unterminated crash line is dropped without resume_from_step too.
    std::ofstream(dir.file("metrics.jsonl"), std::ios::app) << "{\"step\":5";
    MetricsWriter w(run);
    REQUIRE(w.last_step() == 4);
  }
  REQUIRE(slurp(dir.file("metrics.jsonl")) ==
          "{\"step\":1,\"loss\":9}\n{\"step\":2,\"loss\":8}\n{\"step\":3,\"loss\":7}\n"
          "{\"step\":4,\"loss\":7.5,\"lr\":0.1}\n");
  {
    // A bad line in the middle is an error naming the file and line.
    spit(dir.file("metrics.jsonl"), "{\"step\":1}\nnot json\n{\"step\":2}\n");
    REQUIRE_THROWS_WITH(MetricsWriter(run), Catch::Contains(dir.file("metrics.jsonl")) && Catch::Contains("line 2"));
    spit(dir.file("metrics.jsonl"), "{\"loss\":1}\n");
    REQUIRE_THROWS_WITH(MetricsWriter(run), Catch::Contains("line 1") && Catch::Contains("\"step\""));
  }
}

TEST_CASE("metrics: invalid rows are errors that leave both files unchanged", "[checkpoint][metrics]") {
  TempDir dir("metrics-invalid");
  MetricsWriter w(dir.path.string());
  w.log(1, {{"loss", 1}});
  const std::string jsonl = slurp(w.jsonl_path()), csv = slurp(w.csv_path());
  REQUIRE_THROWS_WITH(w.log(2, {{"step", 2}}), Catch::Contains("\"step\" is given as the argument"));
  REQUIRE_THROWS_WITH(w.log(2, {{"x", nullptr}}), Catch::Contains("\"x\" is null"));
  REQUIRE_THROWS_WITH(w.log(2, {{"x", {{"nested", 1}}}}), Catch::Contains("\"x\" is object"));
  REQUIRE_THROWS_WITH(w.log(2, {{"x", {1, "a"}}}), Catch::Contains("\"x\" must be an array of numbers"));
  REQUIRE_THROWS_WITH(w.log(2, {{"a.0", 1}, {"a", {1}}}), Catch::Contains("column \"a.0\" given twice"));
  REQUIRE_THROWS_WITH(w.log(2, nlohmann::ordered_json::array({1, 2})), Catch::Contains("must be a JSON object"));
  REQUIRE_THROWS_WITH(w.log(2, {{"s", std::string("\xff", 1)}}), Catch::Contains("UTF-8"));
  REQUIRE_THROWS_WITH(w.log(0, {{"loss", 1}}), Catch::Contains("step 0 logged after step 1"));
  REQUIRE(slurp(w.jsonl_path()) == jsonl);
  REQUIRE(slurp(w.csv_path()) == csv);
}
