// trainers/io/file_io.cpp — see file_io.h.
#include "trainers/io/file_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/env.h"
#include "core/error.h"
#include "trainers/io/available_memory.h"

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
  try {
    OutputFile f(tmp);
    f.write(contents);
    f.close_synced();
  } catch (...) {  // a full disk: the error says why; no partial temporary file is left behind
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename '{}' to '{}': {}", tmp, path, errno_text(e));
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  fsync_directory(parent.empty() ? std::string(".") : parent.string());
}

namespace {
constexpr uint64_t kBudgetCheckFrom = uint64_t(1) << 20;  // smaller files are always read
constexpr uint64_t kParsedBytesPerByte = 16;
}  // namespace

std::string read_whole_file(const std::string& path, std::string_view what, uint64_t max_bytes) {
  // Regular files only: a FIFO would block the open/read forever, a device (/dev/zero,
  // /dev/urandom, directly or through a symlink) never ends. Opened non-blocking (a FIFO
  // without a writer cannot hang the open), checked with fstat on the descriptor itself (no
  // race with a path swapped after a check), then read with a hard cap of max_bytes + 1.
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    fail("cannot read {} '{}': {}", what, path, ec.message());  // e.g. a symlink loop
  if (!std::filesystem::exists(st)) fail("{} '{}' does not exist", what, path);
  if (std::filesystem::is_directory(st)) fail("{} '{}' is a directory, not a file", what, path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail("cannot open {} '{}': {}", what, path, errno_text(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) fail("cannot read {} '{}': {}", what, path, errno_text(errno));
  if (!S_ISREG(sb.st_mode)) {
    const char* kind = S_ISFIFO(sb.st_mode)  ? "a FIFO (named pipe)"
                       : S_ISCHR(sb.st_mode) ? "a character device"
                       : S_ISBLK(sb.st_mode) ? "a block device"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                                              : "not a regular file";
    fail("{} '{}' is {}; expected a regular file", what, path, kind);
  }
  if (uint64_t(sb.st_size) > max_bytes)
    fail("{} '{}' is {} bytes, more than the limit of {}", what, path, uint64_t(sb.st_size), max_bytes);
  // Bounded by the memory budget too (train::available_memory: RAM, cgroup, RLIMIT_AS/DATA):
  // what is read is parsed (JSON rows, YAML), which takes several times the file's size.
  if (uint64_t(sb.st_size) > kBudgetCheckFrom) {
    const train::AvailableMemory avail = train::available_memory();
    const uint64_t need = uint64_t(sb.st_size) * kParsedBytesPerByte;
    if (avail.bytes > 0 && need > uint64_t(avail.bytes))
      fail("{} '{}' is {} bytes; reading it needs about {} bytes of memory, more than the {} available ({})", what,
           path, uint64_t(sb.st_size), need, avail.bytes, avail.source);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string out;
  out.reserve(size_t(sb.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read {} '{}': {}", what, path, errno_text(errno));
    if (n == 0) break;
    out.append(buf, size_t(n));
    if (out.size() > max_bytes) fail("{} '{}' is more than the limit of {} bytes", what, path, max_bytes);
  }
  return out;
}

DirLock::DirLock(const std::string& dir, std::string_view what) {
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) fail("{} '{}': cannot open the lock file {}: {}", what, dir, path, errno_text(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? std::string(buf, size_t(n)) : std::string();
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK)
      fail("{} '{}' is in use by another relpos process{} (lock {}); wait for it to finish or choose another "
           "directory", what, dir, holder.empty() ? "" : " (pid " + echo_value(holder, 24) + ")", path);
    fail("{} '{}': cannot lock {}: {}", what, dir, path, errno_text(e));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
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
