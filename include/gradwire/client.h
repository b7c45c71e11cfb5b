// gradwire's client library (CMake target gradwire::client): the worker's
// side of the wire without libtorch.
//
//   #include "gradwire/client.h"
//
//   gradwire::ClientOptions options;         // deadlines, retries, TLS
//   options.worker_id = 0;
//   absl::StatusOr<std::unique_ptr<gradwire::GrpcPsClient>> client =
//       gradwire::GrpcPsClient::Connect({"ps-0:7000", "ps-1:7000"}, options);
//   if (!client.ok()) { ... }                // UNAVAILABLE: no shard answered
//   (*client)->Push(requests, ...);          // gradwire.v1 messages
//
// What it declares, each in the header named:
//   PsClient      the interface: Init, Push and Pull over all shards, and
//                 the traffic counted (client/ps_client.h)
//   GrpcPsClient  its gRPC implementation: one channel per shard, retries
//                 with backoff, a deadline on every call
//                 (client/grpc_ps_client.h)
//   ClientOptions deadlines, retries, message limits, transport security
//                 and the worker id, with ValidateClientOptions
//                 (client/client_options.h)
// The requests and responses are the generated messages of
// gradwire/v1/parameter_server.proto (gradwire/v1/parameter_server.pb.h).
//
// Installed, this header lies in <prefix>/include/gradwire/, and the headers
// it includes keep their paths below it; the package's targets put both
// <prefix>/include and <prefix>/include/gradwire on the include path.
#ifndef GRADWIRE_CLIENT_H_
#define GRADWIRE_CLIENT_H_

#include "client/client_options.h"  // IWYU pragma: export
#include "client/grpc_ps_client.h"  // IWYU pragma: export
#include "client/ps_client.h"       // IWYU pragma: export

#endif  // GRADWIRE_CLIENT_H_
