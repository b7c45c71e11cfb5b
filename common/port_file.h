// The file through which a process that listens on --port=0 (a shard's gRPC
// port, any /metrics port) tells others the port the OS gave it.
#ifndef GRADWIRE_COMMON_PORT_FILE_H_
#define GRADWIRE_COMMON_PORT_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace gradwire {

// Writes "<port>\n" to `path` atomically: to a temporary file next to it,
// then rename(2), so a reader polling for `path` sees either nothing or the
// whole line. Errors: the errno-derived status naming the failing path.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_PORT_FILE_H_
