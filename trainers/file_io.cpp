// trainers/file_io.cpp — see file_io.h.
#include "trainers/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

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

std::string read_whole_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {} '{}': {}", what, path, errno_text(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read {} '{}'", what, path);
  return ss.str();
}

}  // namespace relpos
