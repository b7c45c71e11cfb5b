// absl::Mutex's deadlock detector, off in the binaries.
//
// absl records the order in which each thread takes its mutexes in a
// process-wide graph, under a global lock, and aborts on a cycle. Upstream
// absl does that only in debug builds; the absl that Debian 12 ships runs
// it in every build. With that absl the detector makes a nested lock
// several times slower, and taking and releasing a mutex per chunk in
// order (what a shard's DropWorker and a rejoining Init do over every
// chunk, ChunkLocks) tens to hundreds of times slower
// (docs/architecture.md#build-and-test). A shard also locks every chunk a
// push names, and its gRPC threads, metrics and pools lock their own
// mutexes on every call.
//
// gradwire-server, gradwire-worker, the Python module and the benchmarks
// call DisableMutexDeadlockDetection once at start. The unit tests do
// not: there absl's default stays, so that a lock-order inversion a test
// reaches still aborts it.
#ifndef GRADWIRE_COMMON_LOCK_CHECKS_H_
#define GRADWIRE_COMMON_LOCK_CHECKS_H_

namespace gradwire {

// Turns the detector off for the whole process. Call it before the
// process's threads start taking mutexes.
void DisableMutexDeadlockDetection();

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_LOCK_CHECKS_H_
