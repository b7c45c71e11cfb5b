// gradwire's worker library (CMake target gradwire::worker): the few lines
// a libtorch training loop adds to keep its weights on gradwire's shards.
//
//   #include "gradwire/worker.h"
//
//   gradwire::SyncOptions options;
//   options.shard_addresses = {"10.0.0.1:7000", "10.0.0.2:7000"};
//   options.client.worker_id = rank;
//   options.num_workers = world;
//   options.compressor.name = "topk";
//   options.compressor.ratio = 0.01;
//   auto sync = gradwire::ParameterSync::Connect(options);  // StatusOr
//   if (!sync.ok()) { ... }
//   (*sync)->Register(model->named_parameters());           // Init shards
//   for (...) {
//     loss.backward();
//     (*sync)->Step();  // compress with error feedback, push, pull weights
//   }
//
// What it declares, each in the header named:
//   ParameterSync  connects, registers the model's parameters and replaces
//                  the local optimizer step; its contract (tensors,
//                  threads, errors) is in worker/parameter_sync.h
//   SyncOptions    the shards, the compressor, the consistency mode, the
//                  intra-node group and the client's options
//                  (worker/sync_options.h)
// and everything of the client library (gradwire/client.h).
//
// Link gradwire::worker, which links libtorch (find_package(Torch)).
#ifndef GRADWIRE_WORKER_H_
#define GRADWIRE_WORKER_H_

#include "gradwire/client.h"        // IWYU pragma: export
#include "worker/parameter_sync.h"  // IWYU pragma: export
#include "worker/sync_options.h"    // IWYU pragma: export

#endif  // GRADWIRE_WORKER_H_
