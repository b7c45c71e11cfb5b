#include "common/port_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace gradwire {
namespace {

absl::Status Failed(const char* what, const std::string& path) {
  return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path));
}

}  // namespace

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  const std::string line = absl::StrCat(port, "\n");
  const int fd =
      open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Failed("cannot create", temp);
  const bool written =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int write_errno = errno;
  if (close(fd) != 0 || !written) {
    if (!written) errno = write_errno;
    absl::Status status = Failed("cannot write", temp);
    unlink(temp.c_str());
    return status;
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status status = Failed("cannot rename to", path);
    unlink(temp.c_str());
    return status;
  }
  return absl::OkStatus();
}

}  // namespace gradwire
