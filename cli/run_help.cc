// The --help text of `gradwire run` (run_command.h).
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "cli/run_command.h"

// Defined by `gradwire local` (local_command.cc, dashboard_flags.cc),
// shared with gradwire run.
ABSL_DECLARE_FLAG(double, grace_seconds);
ABSL_DECLARE_FLAG(double, start_timeout_seconds);
ABSL_DECLARE_FLAG(double, dashboard_linger_seconds);

namespace gradwire::cli {
namespace {

// What gradwire run does, what each worker finds in its environment, and
// the exit codes.
constexpr absl::string_view kRunDescription =
    R"(gradwire run: runs a training command as W workers, with gradwire shards.

  gradwire run -n 2 -- python3 train.py --epochs 3
  gradwire run -n 4 --shards 2 --run-dir runs/a -- ./my_trainer
  gradwire run --dashboard -n 2 -- python3 train.py
  gradwire run -n 2 --shard-addresses ps-0:7000,ps-1:7000 --tls-ca ca.pem -- python3 train.py
  gradwire run --nnodes 2 --node-rank R --master-addr node-0 -n 2 -- python3 train.py

Starts --shards gradwire-server processes on 127.0.0.1 (ports chosen by the
OS, as gradwire local starts them) and waits until they serve; or, with
--shard-addresses, waits until the shards there answer their health check.
Then starts WORKERS copies of CMD ARGS exactly as given: nothing is added to
the command line, and CMD is looked up in PATH. Each line a worker writes
appears here behind its rank ("[0] ", "[1] ", ...) on stdout or stderr, as
the worker wrote it, and in RUN_DIR/worker-<i>.log. gradwire run's own
messages go to stderr.

Each worker i finds in its environment, besides what it inherits:
  GRADWIRE_SHARDS=HOST:PORT,...   the shards, in shard-id order
  RANK=i  WORLD_SIZE=WORKERS  LOCAL_RANK=0  LOCAL_WORLD_SIZE=1
                                  (every worker is a node of its own)
  MASTER_ADDR=127.0.0.1  MASTER_PORT=a free port (or --master-port)
                                  for a script's own init_process_group
With --nnodes N (one gradwire run per node, as torchrun): node 0 starts the
shards on every interface at ports --master-port+1..+S, every node's workers
get them as MASTER_ADDR:PORT in GRADWIRE_SHARDS, and worker i of node R has
RANK=R*WORKERS+i  WORLD_SIZE=N*WORKERS  LOCAL_RANK=i  LOCAL_WORLD_SIZE=WORKERS
MASTER_ADDR=--master-addr  MASTER_PORT=--master-port and
GRADWIRE_LOCAL_STORE=127.0.0.1:<free port>: the node's workers reduce their
gradients together and push as one gradwire worker.
  GRADWIRE_RUN_DIR=RUN_DIR        the run directory, an absolute path
  GRADWIRE_SUMMARY_JSON=RUN_DIR/worker-<i>.json
                                  where the worker MAY write its summary
  GRADWIRE_TLS_CA, GRADWIRE_TLS_CERT, GRADWIRE_TLS_KEY (absolute paths),
  GRADWIRE_TLS_SERVER_NAME, GRADWIRE_AUTH_TOKEN_FILE (an absolute path)
                                  only those in use (--tls-dir, --tls-*,
                                  --auth-token-file); inherited ones that
                                  are not in use are removed
  OMP_NUM_THREADS=CORES/WORKERS (at least 1), PYTHONUNBUFFERED=1
                                  unless already set

SIGINT (Ctrl-C), SIGTERM and SIGHUP are passed on to the workers, then the
shards get SIGTERM; what still runs --grace-seconds later is killed (a second
Ctrl-C kills at once). When a worker fails, the others get SIGTERM.
After a successful run, a summary: gradwire local's report when every worker
wrote its GRADWIRE_SUMMARY_JSON (docs/run.md lists the keys), otherwise the
bytes and steps the shards counted (their /metrics).
--dashboard starts Prometheus on 127.0.0.1 once the shards serve, as gradwire
local --dashboard does: it scrapes the shards started here and each worker's
/metrics (GRADWIRE_METRICS_PORT_FILE, once it appears; a Python worker serves
it once its DistributedOptimizer connects) and serves gradwire's console
dashboard, whose URL is printed. The workers get
GRADWIRE_METRICS_LINGER_SECONDS=12 (unless set) so that their last counts are
scraped. With --shard-addresses, or on a node other than 0, the shards'
metrics ports are not known here: it scrapes the workers only.

Exit code: 0 when every worker exited 0; otherwise the exit code of the first
worker that failed (128+N for one killed by signal N); 128+N when gradwire run
was stopped by signal N; 1 when a shard or the dashboard failed or did not
serve; 2 for a bad command line.

)";

// The options, with their ranges and defaults.
std::string RunOptionsHelp() {
  return absl::StrFormat(
      R"(Options:
  -n N, --workers=N, --nproc-per-node=N
                           workers to start on this node, 1..%d (required)
  --nnodes=N               nodes, one gradwire run on each (given: the
                           workers of a node form its local group)
  --node-rank=R            this node, 0..N-1 (default 0); node 0 starts the
                           shards, the others join them
  --master-addr=HOST       node 0 as every node reaches it (required with
                           --nnodes > 1)
  --master-port=P          MASTER_PORT (default 29500 with --nnodes, else a
                           free port); node 0's shards use P+1..P+S
  --shards=N               shards to start on 127.0.0.1, 1..%d (default 1)
  --shard-addresses=HOST:PORT,...
                           join these running shards (in shard-id order)
                           instead; excludes --shards, --server-args and
                           --checkpoint-dir
  --run-dir=DIR            the run directory, kept (default: a temporary one,
                           removed after a successful run)
  --keep-logs              keep the temporary run directory
  --grace-seconds=S        how long workers, then shards, may take to exit
                           after the stop signal before SIGKILL (default %g)
  --start-timeout-seconds=S
                           how long the shards may take to serve (default %g)
  --server-args="--FLAG ..."
                           flags added to every gradwire-server started here
  --checkpoint-dir=DIR     shard i checkpoints into DIR/shard-i
  --tls-dir=DIR            mutual TLS and a bearer token from the files of
                           scripts/dev-certs.sh DIR (shards started here and
                           workers; or the workers' side for joined shards)
  --auth-token-file=FILE   the bearer token of shards and workers (default
                           with --tls-dir: DIR/auth-token); without TLS
                           it needs --allow-insecure-token
  --tls-ca=FILE, --tls-cert=FILE, --tls-key=FILE
                           with --shard-addresses: the workers' TLS files
  --tls-server-name=NAME   the name to check in the shards' certificates
  --dashboard              start Prometheus and the console dashboard
  --dashboard-port=P       its port on 127.0.0.1 (default: a free one)
  --dashboard-linger-seconds=S
                           how long it stays up after the run, 0..86400
                           (default %g; Ctrl-C ends it sooner)
  --prometheus=PATH        the Prometheus binary (default: prometheus in
                           PATH)
  --dashboard-consoles=DIR the console templates (default: next to gradwire,
                           or its source tree's deploy/prometheus/consoles)
)",
      kMaxRunProcesses, kMaxRunProcesses, absl::GetFlag(FLAGS_grace_seconds),
      absl::GetFlag(FLAGS_start_timeout_seconds),
      absl::GetFlag(FLAGS_dashboard_linger_seconds));
}

}  // namespace

std::string RunHelp() {
  return absl::StrCat(kRunDescription, RunOptionsHelp());
}

}  // namespace gradwire::cli
