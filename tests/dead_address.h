// A loopback address where nothing listens, for tests of unreachable
// shards.
#ifndef GRADWIRE_TESTS_DEAD_ADDRESS_H_
#define GRADWIRE_TESTS_DEAD_ADDRESS_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace gradwire::testing {

// "127.0.0.1:<port>" with nothing listening (bound, then released).
inline std::string DeadAddress() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
}

}  // namespace gradwire::testing

#endif  // GRADWIRE_TESTS_DEAD_ADDRESS_H_
