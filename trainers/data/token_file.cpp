// trainers/data/token_file.cpp — the token-file reader and writer (token_file.h, docs/data.md).
#include "trainers/data/token_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"
#include "trainers/io/file_io.h"

namespace relpos::train {

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> out{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      out[i] = c;
    }
    return out;
  }();
  return t;
}

// Printable ASCII as is, anything else as \xNN (bytes from a file in a message).
std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c >= 0x20 && c < 0x7F && c != '\\') out += char(c);
    else if (c >= 0x80) out += char(c);  // UTF-8 (validated where it matters) prints as itself
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t(7); }

template <typename T>
T load_le(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian hosts only (x86-64, aarch64)
  return v;
}

// a * b + c with overflow reported as false.
bool mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t& out) {
  uint64_t m;
  if (__builtin_mul_overflow(a, b, &m)) return false;
  return !__builtin_add_overflow(m, c, &out);
}

std::string file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  const auto& t = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = t[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

template <typename... Args>
void TokenFile::bad(const char* f, const Args&... args) const {
  fail("{} '{}': {}", what_, path_, fmt::format(fmt::runtime(f), args...));
}

TokenFile::TokenFile(const std::string& path, uint64_t vocab_override, std::string what)
    : path_(path), what_(std::move(what)) {
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) bad("cannot open: {}", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    bad("cannot stat: {}", std::strerror(e));
  }
  try {
    if (!S_ISREG(st.st_mode)) bad("is {}, not a regular file", file_kind(st.st_mode));
    info_.file_bytes = uint64_t(st.st_size);
    if (info_.file_bytes == 0) bad("is empty (0 bytes): no header");
    // The fixed part of either header, read with pread (no mapping yet).
    unsigned char head[kLlmcHeaderBytes] = {};
    const uint64_t have = std::min<uint64_t>(info_.file_bytes, sizeof head);
    uint64_t got = 0;
    while (got < have) {
      ssize_t r = ::pread(fd_, head + got, have - got, off_t(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) bad("read failed at byte {}: {}", got, r < 0 ? std::strerror(errno) : "unexpected end of file");
      got += uint64_t(r);
    }
    if (have >= 8 && std::memcmp(head, kTokenFileMagic, 8) == 0) {
      open_relpos(head, have, vocab_override);
    } else if (have >= 4 && (load_le<uint32_t>(head) == kLlmcGpt2Magic || load_le<uint32_t>(head) == kLlmcLlama3Magic)) {
      open_llmc(head, have, vocab_override);
    } else {
      std::string shown;
      for (uint64_t i = 0; i < std::min<uint64_t>(have, 8); ++i) shown += fmt::format("{}{:02x}", i ? " " : "", head[i]);
      bad("field 'magic': the file starts with bytes [{}], expected \"RPTOKENS\" (a relpos token file) or the int32 "
          "{} / {} of an llm.c shard",
          shown, kLlmcGpt2Magic, kLlmcLlama3Magic);
    }
    if (info_.file_bytes <= kVerifyOnOpenBytes) verify();
  } catch (...) {
    if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
    map_ = nullptr;
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

void TokenFile::open_llmc(const unsigned char* head, uint64_t have, uint64_t vocab_override) {
  info_.layout = TokenFileLayout::Llmc;
  if (have < kLlmcHeaderBytes)
    bad("truncated llm.c header: the file has {} bytes, the header alone is {}", info_.file_bytes, kLlmcHeaderBytes);
  const uint32_t magic = load_le<uint32_t>(head);
  const int32_t version = load_le<int32_t>(head + 4), count = load_le<int32_t>(head + 8);
  const bool gpt2 = magic == kLlmcGpt2Magic;
  const int32_t want_version = gpt2 ? 1 : 7;
  if (version != want_version)
    bad("field 'version' = {}: an llm.c shard with magic {} has version {}", version, magic, want_version);
  if (count < 0) bad("field 'token count' = {} is negative", count);
  info_.version = uint32_t(version);
  info_.token_bytes = gpt2 ? 2 : 4;
  info_.n_tokens = uint64_t(count);
  info_.n_examples = 1;
  info_.vocab_size = vocab_override > 0 ? vocab_override : (gpt2 ? kGpt2Vocab : kLlama3Vocab);
  if (gpt2 && info_.vocab_size > 65536)
    bad("vocabulary size {} does not fit uint16 tokens (at most 65536)", info_.vocab_size);
  const uint64_t want = kLlmcHeaderBytes + info_.n_tokens * info_.token_bytes;
  if (info_.file_bytes != want)
    bad("field 'token count' = {} needs {} bytes ({} header + {} x {}-byte tokens), the file has {}", count, want,
        kLlmcHeaderBytes, count, info_.token_bytes, info_.file_bytes);
  tokens_at_ = kLlmcHeaderBytes;
  void* m = ::mmap(nullptr, info_.file_bytes, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (m == MAP_FAILED) bad("mmap failed: {}", std::strerror(errno));
  map_ = static_cast<const unsigned char*>(m);
  map_bytes_ = info_.file_bytes;
}

// The fixed header's fields (bytes 0..79), each checked on its own and against the others.
TokenFile::RelposHeader TokenFile::read_relpos_header(const unsigned char* head, uint64_t have,
                                                      uint64_t vocab_override) {
  if (have < kTokenFileFixedHeader)
    bad("truncated header: the file has {} bytes, the fixed header alone is {}", info_.file_bytes,
        kTokenFileFixedHeader);
  RelposHeader h;
  info_.version = load_le<uint32_t>(head + 8);
  if (info_.version != kTokenFileVersion)
    bad("field 'version' = {}: this relpos reads version {}", info_.version, kTokenFileVersion);
  h.header_bytes = load_le<uint32_t>(head + 12);
  info_.token_bytes = load_le<uint32_t>(head + 16);
  h.n_channels = load_le<uint32_t>(head + 20);
  info_.vocab_size = load_le<uint64_t>(head + 24);
  info_.n_tokens = load_le<uint64_t>(head + 32);
  info_.n_examples = load_le<uint64_t>(head + 40);
  h.vocab_bytes = load_le<uint64_t>(head + 48);
  info_.payload_crc32 = load_le<uint32_t>(head + 56);
  h.header_crc = load_le<uint32_t>(head + 60);
  if (info_.token_bytes != 2 && info_.token_bytes != 4)
    bad("field 'token_bytes' = {}: expected 2 (uint16) or 4 (uint32)", info_.token_bytes);
  if (info_.vocab_size < 2 || info_.vocab_size > kMaxTokenVocab)
    bad("field 'vocab_size' = {} is out of range [2, {}]", info_.vocab_size, kMaxTokenVocab);
  if (info_.token_bytes == 2 && info_.vocab_size > 65536)
    bad("field 'vocab_size' = {} does not fit uint16 tokens (token_bytes 2: at most 65536)", info_.vocab_size);
  if (vocab_override > 0 && vocab_override != info_.vocab_size)
    bad("field 'vocab_size' = {}, but the config gives {} (data.shard_vocab is for llm.c shards; leave it 0)",
        info_.vocab_size, vocab_override);
  if (h.n_channels > kMaxTokenChannels)
    bad("field 'n_channels' = {} is out of range [0, {}]", h.n_channels, kMaxTokenChannels);
  if (info_.n_examples < 1) bad("field 'n_examples' = 0: a file holds at least one example");
  if (info_.n_tokens < info_.n_examples)
    bad("field 'n_examples' = {} exceeds field 'n_tokens' = {} (examples are not empty)", info_.n_examples,
        info_.n_tokens);
  if (load_le<uint64_t>(head + 64) != 0 || load_le<uint64_t>(head + 72) != 0)
    bad("reserved header bytes 64..79 are not zero");
  h.table_end = kTokenFileFixedHeader + kTokenChannelEntry * h.n_channels;
  return h;
}

// total += count values of width bytes, padded to 8: an error naming the field when that runs
// past the file (or overflows).
void TokenFile::extend(uint64_t& total, uint64_t count, uint64_t width, const std::string& field) const {
  uint64_t part = 0;
  if (!mul_add(count, width, 7, part) || __builtin_add_overflow(total, part & ~uint64_t(7), &total) ||
      total > info_.file_bytes)
    bad("field '{}' = {} runs past the end of the file ({} bytes)", field, count, info_.file_bytes);
}

// The header's own extent, then the example starts and the tokens, against the file size (no
// overflow); returns where the channels' values start.
uint64_t TokenFile::relpos_extent(const RelposHeader& h) {
  if (h.vocab_bytes > info_.file_bytes)
    bad("field 'vocab_strings_bytes' = {} exceeds the file size {}", h.vocab_bytes, info_.file_bytes);
  if (info_.vocab_size > 0 && h.vocab_bytes != 0 && h.vocab_bytes < 4 * info_.vocab_size)
    bad("field 'vocab_strings_bytes' = {} is too small for {} strings (4 length bytes each at least)", h.vocab_bytes,
        info_.vocab_size);
  const uint64_t want_header = align8(h.table_end + h.vocab_bytes);
  if (h.header_bytes != want_header)
    bad("field 'header_bytes' = {}: {} channels and {} vocabulary-string bytes make a header of {}", h.header_bytes,
        h.n_channels, h.vocab_bytes, want_header);
  if (h.header_bytes > info_.file_bytes)
    bad("truncated header: field 'header_bytes' = {}, the file has {} bytes", h.header_bytes, info_.file_bytes);
  uint64_t total = h.header_bytes;
  offsets_at_ = total;
  extend(total, info_.n_examples + 1, 8, "n_examples");
  tokens_at_ = total;
  extend(total, info_.n_tokens, info_.token_bytes, "n_tokens");
  return total;
}

void TokenFile::check_header_crc(const RelposHeader& h) const {
  uint32_t c = crc32_update(0, map_, 60);
  const unsigned char zero[4] = {};
  c = crc32_update(c, zero, 4);
  c = crc32_update(c, map_ + 64, h.header_bytes - 64);
  if (c != h.header_crc)
    bad("field 'header_crc32' = {:#010x}, the header's bytes give {:#010x} (a damaged header)", h.header_crc, c);
}

// Channel i's table entry: its name, scope and declared range (names: those seen so far).
TokenChannel TokenFile::read_channel(uint32_t i, std::set<std::string>& names) const {
  const unsigned char* e = map_ + kTokenFileFixedHeader + kTokenChannelEntry * i;
  TokenChannel ch;
  const size_t len = strnlen(reinterpret_cast<const char*>(e), 32);
  if (len == 0 || len == 32) bad("channel {}: field 'name' must be 1..31 bytes followed by NUL", i);
  ch.name.assign(reinterpret_cast<const char*>(e), len);
  for (size_t k = len; k < 32; ++k)
    if (e[k] != 0) bad("channel {} ('{}'): field 'name' has bytes after its NUL", i, ch.name);
  for (char x : ch.name)
    if (!((x >= 'a' && x <= 'z') || (x >= '0' && x <= '9') || x == '_'))
      bad("channel {}: field 'name' = '{}' must use only a-z, 0-9 and _", i, escaped(ch.name));
  if (!names.insert(ch.name).second) bad("channel {}: field 'name' = '{}' repeats an earlier channel", i, ch.name);
  const uint32_t scope = load_le<uint32_t>(e + 32);
  if (scope > 1) bad("channel '{}': field 'scope' = {}: expected 0 (per token) or 1 (per example)", ch.name, scope);
  ch.scope = ChannelScope(scope);
  ch.min = load_le<int64_t>(e + 40);
  ch.max = load_le<int64_t>(e + 48);
  if (load_le<uint32_t>(e + 36) != 0 || load_le<uint64_t>(e + 56) != 0)
    bad("channel '{}': reserved bytes are not zero", ch.name);
  constexpr int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  if (ch.min > ch.max || ch.min < lo || ch.max > hi)
    bad("channel '{}': declared range [{}, {}] must satisfy {} <= min <= max <= {} (int32 values)", ch.name, ch.min,
        ch.max, lo, hi);
  return ch;
}

// Vocabulary strings: u32 length + bytes each; UTF-8, non-empty, distinct, within the region.
void TokenFile::read_vocab_strings(const RelposHeader& h) {
  const unsigned char* p = map_ + h.table_end;
  const uint64_t vocab_bytes = h.vocab_bytes;
  uint64_t at = 0;
  std::set<std::string_view> seen;
  info_.vocab.reserve(info_.vocab_size);
  for (uint64_t i = 0; i < info_.vocab_size; ++i) {
    if (at + 4 > vocab_bytes) bad("vocabulary string {}: runs past field 'vocab_strings_bytes' = {}", i, vocab_bytes);
    const uint32_t len = load_le<uint32_t>(p + at);
    at += 4;
    if (len == 0 || len > kMaxVocabString)
      bad("vocabulary string {}: length {} is out of range [1, {}]", i, len, kMaxVocabString);
    if (len > vocab_bytes - at)
      bad("vocabulary string {}: length {} runs past field 'vocab_strings_bytes' = {}", i, len, vocab_bytes);
    std::string_view s(reinterpret_cast<const char*>(p + at), len);
    if (size_t off = utf8_error_offset(s); off != std::string::npos)
      bad("vocabulary string {}: invalid UTF-8 at byte {}", i, off);
    if (!seen.insert(s).second) bad("vocabulary string {} ('{}') repeats an earlier one", i, escaped(s));
    info_.vocab.emplace_back(s);
    at += len;
  }
  if (at != vocab_bytes)
    bad("field 'vocab_strings_bytes' = {}, but {} strings end at byte {}", vocab_bytes, info_.vocab_size, at);
}

// Example boundaries: 0, increasing, ending at n_tokens (8 bytes per example: bounded by the file).
void TokenFile::check_example_starts() const {
  const unsigned char* off = map_ + offsets_at_;
  uint64_t prev = load_le<uint64_t>(off);
  if (prev != 0) bad("field 'example_starts'[0] = {}, expected 0", prev);
  for (uint64_t e = 1; e <= info_.n_examples; ++e) {
    const uint64_t v = load_le<uint64_t>(off + 8 * e);
    if (v <= prev || v > info_.n_tokens)
      bad("field 'example_starts'[{}] = {}: expected a value in ({}, {}] (examples are non-empty and in order){}", e, v,
          prev, info_.n_tokens,
          v > info_.n_tokens ? fmt::format("; example {} would end at token {}, past the file's n_tokens = {}", e - 1,
                                           v, info_.n_tokens)
                             : std::string());
    prev = v;
  }
  if (prev != info_.n_tokens)
    bad("field 'example_starts'[{}] = {}, expected n_tokens = {}", info_.n_examples, prev, info_.n_tokens);
}

void TokenFile::open_relpos(const unsigned char* head, uint64_t have, uint64_t vocab_override) {
  info_.layout = TokenFileLayout::Relpos;
  const RelposHeader h = read_relpos_header(head, have, vocab_override);
  uint64_t total = relpos_extent(h);
  // The mapping: the header and the channel table are read from it from here on.
  void* m = ::mmap(nullptr, info_.file_bytes, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (m == MAP_FAILED) bad("mmap failed: {}", std::strerror(errno));
  map_ = static_cast<const unsigned char*>(m);
  map_bytes_ = info_.file_bytes;
  check_header_crc(h);
  std::set<std::string> names;
  for (uint32_t i = 0; i < h.n_channels; ++i) {
    TokenChannel ch = read_channel(i, names);
    channel_at_.push_back(total);
    extend(total, ch.scope == ChannelScope::Token ? info_.n_tokens : info_.n_examples, 4,
           fmt::format("channel '{}' values", ch.name));
    info_.channels.push_back(std::move(ch));
  }
  if (total != info_.file_bytes)
    bad("the header describes {} bytes, the file has {} ({} bytes {})", total, info_.file_bytes,
        info_.file_bytes > total ? info_.file_bytes - total : total - info_.file_bytes,
        info_.file_bytes > total ? "of trailing data" : "missing");
  if (h.vocab_bytes > 0) read_vocab_strings(h);
  check_example_starts();
}

uint64_t TokenFile::token(uint64_t i) const {
  if (i >= info_.n_tokens) bad("token index {} is past n_tokens = {}", i, info_.n_tokens);
  const unsigned char* p = map_ + tokens_at_ + i * info_.token_bytes;
  const uint64_t v = info_.token_bytes == 2 ? load_le<uint16_t>(p) : load_le<uint32_t>(p);
  if (v >= info_.vocab_size)
    bad("field 'tokens'[{}] = {} is outside the vocabulary [0, {}){}", i, v, info_.vocab_size,
        info_.layout == TokenFileLayout::Llmc ? " (data.shard_vocab sets an llm.c shard's vocabulary size)" : "");
  return v;
}

std::vector<int64_t> TokenFile::tokens(uint64_t begin, uint64_t end) const {
  if (begin > end || end > info_.n_tokens) bad("token range [{}, {}) is outside [0, {})", begin, end, info_.n_tokens);
  std::vector<int64_t> out;
  out.reserve(end - begin);
  for (uint64_t i = begin; i < end; ++i) out.push_back(int64_t(token(i)));
  return out;
}

uint64_t TokenFile::example_start(uint64_t e) const {
  if (e > info_.n_examples) bad("example index {} is past n_examples = {}", e, info_.n_examples);
  if (info_.layout == TokenFileLayout::Llmc) return e == 0 ? 0 : info_.n_tokens;
  return load_le<uint64_t>(map_ + offsets_at_ + 8 * e);
}

int64_t TokenFile::channel(size_t c, uint64_t i) const {
  if (c >= info_.channels.size()) bad("channel index {} is past n_channels = {}", c, info_.channels.size());
  const TokenChannel& ch = info_.channels[c];
  const uint64_t n = ch.scope == ChannelScope::Token ? info_.n_tokens : info_.n_examples;
  if (i >= n) bad("channel '{}': index {} is past its {} values", ch.name, i, n);
  const int64_t v = load_le<int32_t>(map_ + channel_at_[c] + 4 * i);
  if (v < ch.min || v > ch.max) {
    std::string where;  // the example of a per-token value, and its place there
    if (ch.scope == ChannelScope::Token && info_.layout == TokenFileLayout::Relpos) {
      uint64_t lo = 0, hi = info_.n_examples;  // the last example starting at or before i
      while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        (load_le<uint64_t>(map_ + offsets_at_ + 8 * mid) <= i ? lo : hi) = mid;
      }
      where = fmt::format(" (example {}, its token {})", lo, i - load_le<uint64_t>(map_ + offsets_at_ + 8 * lo));
    } else if (ch.scope == ChannelScope::Example) {
      where = fmt::format(" (example {})", i);
    }
    bad("channel '{}'[{}] = {} is outside its declared range [{}, {}]{}", ch.name, i, v, ch.min, ch.max, where);
  }
  return v;
}

void TokenFile::verify() const {
  if (info_.layout == TokenFileLayout::Relpos) {
    const uint64_t hb = offsets_at_;
    const uint32_t c = crc32_update(0, map_ + hb, info_.file_bytes - hb);
    if (c != info_.payload_crc32)
      bad("field 'payload_crc32' = {:#010x}, the {} bytes after the header give {:#010x} (damaged or truncated data)",
          info_.payload_crc32, info_.file_bytes - hb, c);
  }
  for (uint64_t i = 0; i < info_.n_tokens; ++i) (void)token(i);
  for (size_t c = 0; c < info_.channels.size(); ++c) {
    const uint64_t n = info_.channels[c].scope == ChannelScope::Token ? info_.n_tokens : info_.n_examples;
    for (uint64_t i = 0; i < n; ++i) (void)channel(c, i);
  }
}

void write_token_file(const std::string& path, uint64_t vocab_size, const std::vector<int64_t>& tokens,
                      const std::vector<uint64_t>& example_starts, const std::vector<std::string>& vocab,
                      const std::vector<TokenChannel>& channels, const std::vector<std::vector<int32_t>>& values,
                      uint32_t token_bytes) {
  if (token_bytes == 0) token_bytes = vocab_size <= 65536 ? 2 : 4;
  RELPOS_CHECK(!example_starts.empty() && example_starts[0] == 0, "write_token_file '{}': example_starts must start at 0", path);
  RELPOS_CHECK(vocab.empty() || vocab.size() == vocab_size, "write_token_file '{}': {} vocabulary strings for vocab_size {}",
               path, vocab.size(), vocab_size);
  RELPOS_CHECK(values.size() == channels.size(), "write_token_file '{}': {} channels, {} value columns", path,
               channels.size(), values.size());
  auto put32 = [](std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
  auto put64 = [](std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); };
  auto pad = [](std::string& s) { s.resize(align8(s.size()), '\0'); };
  std::string strings;
  for (const auto& v : vocab) {
    put32(strings, uint32_t(v.size()));
    strings += v;
  }
  std::string h(kTokenFileMagic, 8);
  put32(h, kTokenFileVersion);
  const uint64_t table_end = kTokenFileFixedHeader + kTokenChannelEntry * channels.size();
  put32(h, uint32_t(align8(table_end + strings.size())));
  put32(h, token_bytes);
  put32(h, uint32_t(channels.size()));
  put64(h, vocab_size);
  put64(h, tokens.size());
  put64(h, example_starts.size());
  put64(h, strings.size());
  put32(h, 0);  // payload crc, filled below
  put32(h, 0);  // header crc
  put64(h, 0);
  put64(h, 0);
  for (const auto& ch : channels) {
    std::string name = ch.name;
    name.resize(32, '\0');
    h += name;
    put32(h, uint32_t(ch.scope));
    put32(h, 0);
    put64(h, uint64_t(ch.min));
    put64(h, uint64_t(ch.max));
    put64(h, 0);
  }
  h += strings;
  pad(h);
  std::string body;
  for (uint64_t s : example_starts) put64(body, s);
  put64(body, tokens.size());
  for (int64_t t : tokens) {
    if (token_bytes == 2) {
      const uint16_t v = uint16_t(t);
      body.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      put32(body, uint32_t(t));
    }
  }
  pad(body);
  for (const auto& col : values) {
    body.append(reinterpret_cast<const char*>(col.data()), col.size() * 4);
    pad(body);
  }
  const uint32_t pc = crc32_update(0, body.data(), body.size());
  std::memcpy(h.data() + 56, &pc, 4);
  const uint32_t hc = crc32_update(0, h.data(), h.size());
  std::memcpy(h.data() + 60, &hc, 4);
  replace_file_atomically(path, h + body);
}

std::string describe_token_file(const TokenFile& f, int64_t sample_tokens) {
  const TokenFileInfo& in = f.info();
  std::string s;
  s += fmt::format("file:        {} ({} bytes)\n", f.path(), in.file_bytes);
  s += fmt::format("layout:      {} version {}\n",
                   in.layout == TokenFileLayout::Relpos ? "relpos token file (RPTOKENS)" : "llm.c token shard",
                   in.version);
  s += fmt::format("tokens:      {} x uint{} (vocabulary {}, {})\n", in.n_tokens, in.token_bytes * 8, in.vocab_size,
                   in.vocab.empty() ? "no strings stored" : "strings stored");
  s += fmt::format("examples:    {}", in.n_examples);
  if (in.n_examples > 0 && in.layout == TokenFileLayout::Relpos) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t e = 0; e < in.n_examples; ++e) {
      const uint64_t n = f.example_start(e + 1) - f.example_start(e);
      lo = std::min(lo, n), hi = std::max(hi, n);
    }
    s += fmt::format(" (lengths {}..{}, mean {:.1f})", lo, hi, double(in.n_tokens) / double(in.n_examples));
  }
  s += "\n";
  if (in.layout == TokenFileLayout::Relpos) s += fmt::format("checksum:    payload crc32 {:#010x} (verified)\n", in.payload_crc32);
  s += fmt::format("channels:    {}\n", in.channels.size());
  for (size_t c = 0; c < in.channels.size(); ++c) {
    const TokenChannel& ch = in.channels[c];
    const uint64_t n = ch.scope == ChannelScope::Token ? in.n_tokens : in.n_examples;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (uint64_t i = 0; i < n; ++i) {
      const int64_t v = f.channel(c, i);
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
    s += fmt::format("  {:<16} per {:<7} declared [{}, {}], values [{}, {}]\n", ch.name,
                     ch.scope == ChannelScope::Token ? "token" : "example", ch.min, ch.max, lo, hi);
  }
  const uint64_t n = std::min<uint64_t>(in.n_tokens, uint64_t(std::max<int64_t>(sample_tokens, 0)));
  std::string ids, text;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t t = f.token(i);
    ids += fmt::format("{}{}", i ? " " : "", t);
    if (!in.vocab.empty()) text += in.vocab[t];
  }
  s += fmt::format("first {} tokens: {}\n", n, ids);
  if (!in.vocab.empty()) s += fmt::format("decoded:     \"{}\"\n", escaped(text));
  return s;
}

}  // namespace relpos::train
