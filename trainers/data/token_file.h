// trainers/data/token_file.h — the prepared-dataset reader (docs/data.md has the byte layout):
// relpos token files ("RPTOKENS": tokens, example boundaries, optional vocabulary strings and
// per-token or per-example integer channels) and llm.c / nanoGPT token shards (256 int32 header,
// magic 20240520 uint16 or 20240801 uint32). Every field is range-checked against the header and
// the file size before anything is read past the header; the file is memory-mapped, never read
// whole. Errors are relpos::Error naming the file, the field and the value.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace relpos::train {

inline constexpr char kTokenFileMagic[9] = "RPTOKENS";
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr uint64_t kTokenFileFixedHeader = 80;  // bytes before the channel table
inline constexpr uint64_t kTokenChannelEntry = 64;     // bytes per channel-table entry
inline constexpr uint32_t kMaxTokenChannels = 16;
inline constexpr uint64_t kMaxTokenVocab = uint64_t(1) << 24;  // vocabulary sizes beyond any model here
inline constexpr uint32_t kMaxVocabString = 1024;              // bytes of one vocabulary string
// Files up to this size are verified whole when opened (checksum, every token and channel value);
// larger ones are checked as they are read (every access range-checks) and by `relpos data inspect`.
inline constexpr uint64_t kVerifyOnOpenBytes = uint64_t(256) << 20;
// llm.c shards: their two magics (GPT-2: version 1, uint16; Llama-3: version 7, uint32).
inline constexpr uint32_t kLlmcGpt2Magic = 20240520, kLlmcLlama3Magic = 20240801;
inline constexpr uint64_t kLlmcHeaderBytes = 256 * 4;
inline constexpr uint64_t kGpt2Vocab = 50257, kLlama3Vocab = 128256;

enum class TokenFileLayout { Relpos, Llmc };
enum class ChannelScope : uint32_t { Token = 0, Example = 1 };

struct TokenChannel {
  std::string name;  // [a-z0-9_]+, at most 31 bytes
  ChannelScope scope = ChannelScope::Token;
  int64_t min = 0, max = 0;  // declared range of the int32 values (inclusive)
};

struct TokenFileInfo {
  TokenFileLayout layout = TokenFileLayout::Relpos;
  uint32_t version = 0;
  uint32_t token_bytes = 2;  // 2: uint16, 4: uint32
  uint64_t vocab_size = 0;
  uint64_t n_tokens = 0;
  uint64_t n_examples = 0;   // llm.c shards: 1 (documents are delimited by their EOT token)
  std::vector<TokenChannel> channels;
  std::vector<std::string> vocab;  // the token strings, empty when the file stores none
  uint32_t payload_crc32 = 0;
  uint64_t file_bytes = 0;
};

// CRC-32 (IEEE 802.3, zlib's crc32) of `n` bytes continuing from `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);

class TokenFile {
 public:
  // Opens `path` (a regular file: a FIFO, device or directory is refused without blocking) and
  // validates its header against the file size. `vocab_override` > 0 replaces the vocabulary size
  // of an llm.c shard (their headers hold none: GPT-2 50257, Llama-3 128256); for a relpos file
  // it must equal the header's. `what` names the file in errors ("data.path", ...).
  TokenFile(const std::string& path, uint64_t vocab_override = 0, std::string what = "token file");
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const TokenFileInfo& info() const { return info_; }
  const std::string& path() const { return path_; }
  // Token i (< n_tokens), checked against the vocabulary size.
  uint64_t token(uint64_t i) const;
  // Tokens [begin, end) as int64 ids, each checked.
  std::vector<int64_t> tokens(uint64_t begin, uint64_t end) const;
  // First token of example e (e <= n_examples; example_start(n_examples) = n_tokens).
  uint64_t example_start(uint64_t e) const;
  // Value i of channel c (i < n_tokens or n_examples by its scope), checked against its range.
  int64_t channel(size_t c, uint64_t i) const;
  // Reads the whole payload once (streamed through the mapping): the checksum, every token and
  // every channel value. `relpos data inspect` and opening a file of at most kVerifyOnOpenBytes.
  void verify() const;

 private:
  void open_relpos(const unsigned char* head, uint64_t have, uint64_t vocab_override);
  struct RelposHeader {  // the fixed header's layout fields (the rest go to info_)
    uint32_t header_bytes = 0, n_channels = 0, header_crc = 0;
    uint64_t vocab_bytes = 0, table_end = 0;
  };
  RelposHeader read_relpos_header(const unsigned char* head, uint64_t have, uint64_t vocab_override);
  uint64_t relpos_extent(const RelposHeader& h);
  void extend(uint64_t& total, uint64_t count, uint64_t width, const std::string& field) const;
  void check_header_crc(const RelposHeader& h) const;
  TokenChannel read_channel(uint32_t i, std::set<std::string>& names) const;
  void read_vocab_strings(const RelposHeader& h);
  void check_example_starts() const;
  void open_llmc(const unsigned char* head, uint64_t have, uint64_t vocab_override);
  template <typename... Args>
  [[noreturn]] void bad(const char* f, const Args&... args) const;

  std::string path_, what_;
  int fd_ = -1;
  const unsigned char* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  TokenFileInfo info_;
  uint64_t offsets_at_ = 0, tokens_at_ = 0;  // byte offsets into the file
  std::vector<uint64_t> channel_at_;
};

// Writes a relpos token file (the layout of docs/data.md): tokens, example boundaries
// (example_starts: the first token of each example, starting at 0, increasing), optional
// vocabulary strings and channels (values[c] has n_tokens or n_examples entries by scope).
// token_bytes 0: 2 when vocab_size <= 65536, else 4. Written atomically (a sibling temporary).
void write_token_file(const std::string& path, uint64_t vocab_size, const std::vector<int64_t>& tokens,
                      const std::vector<uint64_t>& example_starts, const std::vector<std::string>& vocab = {},
                      const std::vector<TokenChannel>& channels = {},
                      const std::vector<std::vector<int32_t>>& values = {}, uint32_t token_bytes = 0);

// A text summary of a token file (`relpos data inspect`): the header, counts, channel ranges and
// the first `sample_tokens` tokens (decoded through the vocabulary strings when stored).
std::string describe_token_file(const TokenFile& f, int64_t sample_tokens = 32);

}  // namespace relpos::train
