// POSIX file calls with statuses, shared by the checkpoint files
// (checkpoint_files.h) and the write-ahead log (write_ahead_log.h):
// errno-named statuses, EINTR retries, durable directory creation and whole
// file reads. Every error names the path it concerns. (Named for what it
// wraps; it was file_util.h. See checkpoint_format.h for the names of
// server/durability/.)
#ifndef GRADWIRE_SERVER_DURABILITY_POSIX_FILES_H_
#define GRADWIRE_SERVER_DURABILITY_POSIX_FILES_H_

#include <errno.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {

// Calls f() until it returns something other than -1 with errno EINTR.
template <typename F>
auto RetryOnEintr(F f) {
  decltype(f()) result;
  do {
    result = f();
  } while (result == -1 && errno == EINTR);
  return result;
}

// The status for the current errno: "<what> <path>: <strerror>".
absl::Status ErrnoStatus(absl::string_view what, const std::string& path);

// Closes the descriptor unless Release()d; for error paths.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Writes all `size` bytes, looping over short writes.
absl::Status WriteAll(int fd, const char* data, size_t size,
                      const std::string& path);

// fsyncs the directory itself, so that entries created or renamed in it
// survive a crash.
absl::Status FsyncDirectory(const std::string& dir);

// The directory part of `path` ("." when there is none).
std::string ParentDirectory(const std::string& path);

// mkdir -p, fsyncing the parent of each directory it creates.
// FAILED_PRECONDITION when `dir` exists and is not a directory.
absl::Status MakeDirectories(const std::string& dir);

struct FileBytes {
  std::unique_ptr<char[]> data;
  size_t size = 0;

  absl::string_view view() const { return {data.get(), size}; }
};

// Reads up to the size fstat reports; a file that shrinks meanwhile yields
// fewer bytes, which the caller's parser reports as a tear.
absl::StatusOr<FileBytes> ReadWholeFile(const std::string& path);

// The names of the entries of `dir` (without "." and ".."). NOT_FOUND when
// it does not exist.
absl::StatusOr<std::vector<std::string>> ListFileNames(const std::string& dir);

// Deletes `path`; OK when it did not exist.
absl::Status RemoveFile(const std::string& path);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_POSIX_FILES_H_
