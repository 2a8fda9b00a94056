// trainers/file_io.cpp — see file_io.h.
#include "relpos/trainers/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "relpos/core/error.h"

namespace relpos {

namespace {
std::string errno_text(int e) { return std::strerror(e); }
}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create file '{}': {}", path_, errno_text(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, size_t n) {
  RELPOS_CHECK(fd_ >= 0, "file '{}' is already closed", path_);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write file '{}': {}", path_, errno_text(errno));
    }
    p += w;
    n -= size_t(w);
  }
}

void OutputFile::close_synced() {
  RELPOS_CHECK(fd_ >= 0, "file '{}' is already closed", path_);
  int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    fail("cannot fsync file '{}': {}", path_, errno_text(e));
  }
  if (::close(fd) != 0) fail("cannot close file '{}': {}", path_, errno_text(errno));
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory '{}' to fsync it: {}", dir, errno_text(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  // Some file systems do not support fsync on directories (EINVAL); nothing more to do there.
  if (rc != 0 && e != EINVAL) fail("cannot fsync directory '{}': {}", dir, errno_text(e));
}

void replace_file_atomically(const std::string& path, std::string_view contents) {
  std::string tmp = path + ".tmp";
  {
    OutputFile f(tmp);
    f.write(contents);
    f.close_synced();
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename '{}' to '{}': {}", tmp, path, errno_text(e));
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  fsync_directory(parent.empty() ? std::string(".") : parent.string());
}

std::string read_whole_file(const std::string& path, std::string_view what, uint64_t max_bytes) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) fail("{} '{}' does not exist", what, path);
  if (std::filesystem::is_directory(st)) fail("{} '{}' is a directory, not a file", what, path);
  if (std::filesystem::is_regular_file(st)) {
    uint64_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > max_bytes) fail("{} '{}' is {} bytes, more than the limit of {}", what, path, size, max_bytes);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {} '{}': {}", what, path, errno_text(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read {} '{}'", what, path);
  std::string out = ss.str();
  if (out.size() > max_bytes) fail("{} '{}' is more than the limit of {} bytes", what, path, max_bytes);
  return out;
}

size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;             // no overlong 3-byte forms
  else if (c == 0xED) n = 3, hi = 0x9F;             // no surrogates U+D800..DFFF
  else if (c >= 0xE1 && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;             // no overlong 4-byte forms
  else if (c == 0xF4) n = 4, hi = 0x8F;             // nothing above U+10FFFF
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else return 0;                                    // 0x80..0xC1, 0xF5..0xFF
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

size_t utf8_error_offset(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace relpos
