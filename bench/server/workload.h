// The pre-built traffic of gradwire-bench-server: one shard's Init and, for
// each pusher, one PushRequest per chunk, plus the same requests
// serialized and length-prefixed for the raw TCP bound. Everything here is
// built once, before any timed region.
#ifndef GRADWIRE_BENCH_SERVER_WORKLOAD_H_
#define GRADWIRE_BENCH_SERVER_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/server/config.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire::bench {

// One pusher's traffic for one round: every chunk once.
struct PusherLoad {
  // The chunks in key order, ServerBenchConfig::chunks_per_push to a
  // request; worker_id is the pusher's index. The pusher sets `step` before
  // each send (only its own thread touches them).
  std::vector<v1::PushRequest> requests;
  // requests[i] serialized (with step 1), each behind a 4-byte little-endian
  // length: what the TCP bound sends.
  std::vector<std::string> frames;
  // Elements and serialized request bytes (prefixes not counted) that one
  // round carries.
  uint64_t selected = 0;
  uint64_t payload_bytes = 0;
};

struct Workload {
  uint64_t numel = 0;
  uint64_t num_chunks = 0;
  double density = 0.0;
  // Worker 0's Init of shard 0 of 1: every chunk, zero weights, plain SGD.
  // The caller sets config.num_workers and config.mode per measurement.
  v1::InitRequest init;
  // Indexed by pusher (= worker id); as many as the largest pusher count.
  std::vector<PusherLoad> pushers;
};

// Partitions config.numel parameters (one tensor, config.partition_bytes, one
// shard) and builds the Init and `max_pushers` pushers' requests: for each
// (pusher, chunk) a distinct pseudo-random gradient, compressed by
// config.compressor (at config.density for a sparsifier; fp16 values except
// for "none") and encoded by the wire codec. Workload::density is the
// fraction of elements the pushes carry. Errors come
// from the partition, the compressor or the codec.
absl::StatusOr<Workload> BuildWorkload(const ServerBenchConfig& config,
                                       uint32_t max_pushers);

// The raw TCP baseline for the dense gradient of the same model: for each of
// `pushers` pushers, one frame per chunk of `partition_bytes` (the last
// one shorter) whose payload is the chunk's fp32 values, numel * 4 bytes,
// behind the same 4-byte length prefix. Only `frames`, `selected` (numel)
// and `payload_bytes` are set; no requests.
std::vector<PusherLoad> BuildDenseTcpLoads(uint64_t numel,
                                           uint64_t partition_bytes,
                                           uint32_t pushers);

// Sets the worker count and mode of workload->init and returns it.
const v1::InitRequest& ConfigureInit(uint32_t num_workers,
                                     v1::ConsistencyMode mode,
                                     Workload* workload);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_SERVER_WORKLOAD_H_
