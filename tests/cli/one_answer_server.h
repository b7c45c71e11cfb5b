// A loopback HTTP server for the dashboard's tests: it answers one
// connection with a fixed answer, as Prometheus's /-/ready would.
//
// Thread safety: its thread serves; construct and destroy it from one
// thread.
#ifndef GRADWIRE_TESTS_CLI_ONE_ANSWER_SERVER_H_
#define GRADWIRE_TESTS_CLI_ONE_ANSWER_SERVER_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <utility>

#include "gtest/gtest.h"

namespace gradwire::cli {

// A loopback server that answers one connection with `answer`; its
// destructor waits for that connection.
class OneAnswerServer {
 public:
  explicit OneAnswerServer(std::string answer) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(fd_, 1), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, answer = std::move(answer)] {
      const int client = accept(fd_, nullptr, nullptr);
      char request[256];
      (void)!recv(client, request, sizeof(request), 0);
      (void)!send(client, answer.data(), answer.size(), 0);
      close(client);
    });
  }
  ~OneAnswerServer() {
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace gradwire::cli

#endif  // GRADWIRE_TESTS_CLI_ONE_ANSWER_SERVER_H_
