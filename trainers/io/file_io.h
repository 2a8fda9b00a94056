// trainers/io/file_io.h — the small POSIX file layer under checkpoints and metrics: a write-only
// file whose bytes reach the disk (fsync) before it is closed, directory fsync (so a rename
// or a new entry survives a power loss), and atomic replacement of a whole file through a
// sibling temporary. Every error is a relpos::Error naming the path and the system's reason.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace relpos {

// A file opened for writing (created, truncated, mode 0644). write() loops over partial
// writes and EINTR; close_synced() fsyncs and closes and reports either failure. A file
// destroyed without close_synced() (an exception unwinding) is closed without a sync.
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void close_synced();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// fsync a directory, so entries created, renamed or removed in it are durable.
void fsync_directory(const std::string& dir);

// Replace `path` by `contents` atomically: write "<path>.tmp", fsync, rename over `path`,
// fsync the parent directory. A reader sees the old or the new file, never a mix.
void replace_file_atomically(const std::string& path, std::string_view contents);

// The whole file as bytes; errors name the path (what = "metrics file", ...). A directory, a
// missing or unreadable path is an error; so is a file over max_bytes (checked from its
// size before reading).
std::string read_whole_file(const std::string& path, std::string_view what,
                            uint64_t max_bytes = uint64_t(1) << 32);

// An exclusive advisory lock (flock) on <dir>/.relpos.lock, held while this object lives:
// one process at a time trains, resumes or writes into a run directory. The holder's pid is
// written into the file; a second process gets an error naming the directory and that pid.
// The lock is released by the kernel when the process ends, however it ends (kill -9).
class DirLock {
 public:
  DirLock(const std::string& dir, std::string_view what);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  static constexpr const char* kFileName = ".relpos.lock";

 private:
  int fd_ = -1;
};

// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF) — the
// same rule nlohmann::json applies when it writes a string. Returns the byte offset of the
// first invalid sequence, or npos when all of `s` is valid.
size_t utf8_error_offset(std::string_view s);
// Length in bytes of the valid UTF-8 sequence starting at s[i] (0 when invalid there).
size_t utf8_sequence_length(std::string_view s, size_t i);

}  // namespace relpos
