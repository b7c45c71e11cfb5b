#include "server/durability/posix_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gradwire {

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path));
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) close(fd_);
}

absl::Status WriteAll(int fd, const char* data, size_t size,
                      const std::string& path) {
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; ask for less and loop.
    const size_t ask = std::min<size_t>(size, size_t{1} << 30);
    const ssize_t n = RetryOnEintr([&] { return write(fd, data, ask); });
    if (n < 0) return ErrnoStatus("cannot write", path);
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status FsyncDirectory(const std::string& dir) {
  ScopedFd fd(RetryOnEintr(
      [&] { return open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }));
  if (fd.get() < 0) return ErrnoStatus("cannot open directory", dir);
  if (RetryOnEintr([&] { return fsync(fd.get()); }) != 0) {
    return ErrnoStatus("cannot fsync directory", dir);
  }
  return absl::OkStatus();
}

std::string ParentDirectory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status MakeDirectories(const std::string& dir) {
  for (size_t end = dir.find('/', 1); true; end = dir.find('/', end + 1)) {
    const std::string prefix = dir.substr(0, end);
    if (mkdir(prefix.c_str(), 0755) == 0) {
      absl::Status synced = FsyncDirectory(ParentDirectory(prefix));
      if (!synced.ok()) return synced;
    } else if (errno != EEXIST) {
      return ErrnoStatus("cannot create directory", prefix);
    }
    if (end == std::string::npos) break;
  }
  struct stat info;
  if (stat(dir.c_str(), &info) != 0) return ErrnoStatus("cannot stat", dir);
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<FileBytes> ReadWholeFile(const std::string& path) {
  ScopedFd fd(
      RetryOnEintr([&] { return open(path.c_str(), O_RDONLY | O_CLOEXEC); }));
  if (fd.get() < 0) return ErrnoStatus("cannot open", path);
  struct stat info;
  if (fstat(fd.get(), &info) != 0) return ErrnoStatus("cannot stat", path);
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file"));
  }
  const size_t capacity = static_cast<size_t>(info.st_size);
  // Uninitialised on purpose: zero-filling hundreds of MB costs real time.
  FileBytes file{std::unique_ptr<char[]>(new char[capacity]), 0};
  while (file.size < capacity) {
    const ssize_t n = RetryOnEintr([&] {
      return read(fd.get(), file.data.get() + file.size, capacity - file.size);
    });
    if (n < 0) return ErrnoStatus("cannot read", path);
    if (n == 0) break;
    file.size += static_cast<size_t>(n);
  }
  return file;
}

absl::StatusOr<std::vector<std::string>> ListFileNames(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> handle(opendir(dir.c_str()), closedir);
  if (handle == nullptr) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no directory ", dir));
    }
    return ErrnoStatus("cannot list directory", dir);
  }
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    const dirent* entry = readdir(handle.get());
    if (entry == nullptr) break;
    const absl::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  if (errno != 0) return ErrnoStatus("cannot list directory", dir);
  return names;
}

absl::Status RemoveFile(const std::string& path) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus("cannot delete", path);
  }
  return absl::OkStatus();
}

}  // namespace gradwire
