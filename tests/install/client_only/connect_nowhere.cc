// Connects a GrpcPsClient to the shard address given as the only argument
// (one where nothing listens) with a one-second connect timeout, and prints
// the error. Exit code 0 when Connect failed with UNAVAILABLE as documented
// (client/grpc_ps_client.h), 1 otherwise, 2 for bad arguments.
#include <cstdio>

#include "gradwire/client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
    return 2;
  }
  gradwire::ClientOptions options;
  options.connect_timeout = absl::Seconds(1);
  if (absl::Status valid = gradwire::ValidateClientOptions(options);
      !valid.ok()) {
    std::fprintf(stderr, "options: %s\n", valid.ToString().c_str());
    return 1;
  }
  auto client = gradwire::GrpcPsClient::Connect({argv[1]}, options);
  if (client.ok()) {
    std::fprintf(stderr, "connected to %s, where nothing should listen\n",
                 argv[1]);
    return 1;
  }
  std::printf("connect: %s\n", client.status().ToString().c_str());
  return absl::IsUnavailable(client.status()) ? 0 : 1;
}
