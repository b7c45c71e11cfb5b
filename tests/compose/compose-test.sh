#!/usr/bin/env bash
# make compose-test: the compose cluster as a user brings it up, with real
# containers, ports and Prometheus, for each of
#
#   tls        docker-compose.yml (mutual TLS and per-worker tokens; the
#              certificates and tokens from scripts/dev-certs.sh, owned by
#              the containers' user as the compose file's header says)
#   plaintext  docker-compose.yml with docker-compose.plaintext.yml
#
# First the images alone: each runs as its non-root user, and the health
# checks built into the server and Prometheus images pass in a container.
# Then, for each config: 2 shards, 2 workers and Prometheus come up (no
# Grafana: its profile stays off), the shards and Prometheus become healthy
# by their compose health checks, and the workers train GRADWIRE_MAX_STEPS
# steps. Once they are COMPOSE_KILL_AT steps in, shard-0's process is
# SIGKILLed: its container must restart, replay its write-ahead log from its
# volume and become healthy again, and both workers must finish every step
# and exit 0. The bytes that Prometheus scraped from each worker
# (gradwire_worker_sent_bytes_total{rpc="push"}) must equal the pushed_bytes
# of that worker's summary. Finally `down -v`, after which no container,
# network or volume of the project may be left.
#
# Usage: tests/compose/compose-test.sh [tls|plaintext]...  (default: both)
#   Needs the images gradwire-server, gradwire-worker and gradwire-prometheus
#   (make images or make images-prebuilt).
#   COMPOSE_STEPS (default 160): the workers' GRADWIRE_MAX_STEPS.
#   COMPOSE_KILL_AT (default 40): the step at which shard-0 is killed.
#   COMPOSE_TIMEOUT (default 900): seconds for one config, start to end.
# Exit status: 0 passed, 1 failed, 77 skipped (no container engine can run
# here at all; the reason is printed).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/container-engine.sh
source scripts/container-engine.sh --require

CONFIGS=("$@")
[[ ${#CONFIGS[@]} -gt 0 ]] || CONFIGS=(tls plaintext)
STEPS=${COMPOSE_STEPS:-160}
KILL_AT=${COMPOSE_KILL_AT:-40}
TIMEOUT=${COMPOSE_TIMEOUT:-900}
PYTHON=/usr/bin/python3
IMAGES=(gradwire-server gradwire-worker gradwire-prometheus)
# No profile support in podman-compose 1.0.3: it gets the services by name.
SERVICES=(shard-0 shard-1 worker-0 worker-1 prometheus)

if [[ ${#COMPOSE[@]} -eq 0 ]]; then
  echo "compose-test: FAILED: $ENGINE runs, but no compose tool was found (docker compose, docker-compose or podman-compose; scripts/install-deps.sh installs podman-compose)" >&2
  exit 1
fi
for image in "${IMAGES[@]}"; do
  if ! "$ENGINE" image inspect "$image:latest" >/dev/null 2>&1; then
    echo "compose-test: FAILED: no image $image:latest: run make images (or make images-prebuilt)" >&2
    exit 1
  fi
done

WORK=$(mktemp -d)
project=""
compose_files=()
started=$SECONDS
passed=0
failed=0

log() { echo "compose-test: $*"; }
fail() {
  echo "compose-test: FAILED: $*" >&2
  return 1
}

# compose ARGS...: the compose tool on the current project and files.
compose() {
  local files=() file
  for file in "${compose_files[@]}"; do files+=(-f "$file"); done
  "${COMPOSE[@]}" -p "$project" "${files[@]}" "$@"
}

# container SERVICE: the id of the project's container of SERVICE.
container() {
  "$ENGINE" ps -a -q --filter "label=com.docker.compose.project=$project" \
    --filter "label=com.docker.compose.service=$1" | head -1
}

inspect() { "$ENGINE" inspect --format "$2" "$(container "$1")"; }

# healthy SERVICE: runs the container's health check once (podman has no
# scheduler for health checks without systemd, so it is run here; Docker
# runs them itself and is asked for the result).
healthy() {
  local id
  id=$(container "$1")
  [[ -n "$id" ]] || return 1
  if [[ "$ENGINE" == podman ]]; then
    podman healthcheck run "$id" >/dev/null 2>&1
  else
    [[ "$(docker inspect --format '{{.State.Health.Status}}' "$id")" == healthy ]]
  fi
}

# wait_for SECONDS WHAT COMMAND...: COMMAND until it succeeds, once a second.
wait_for() {
  local seconds=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@"; do
    if ((SECONDS >= deadline)); then
      fail "$what: not within $seconds s"
      return 1
    fi
    sleep 1
  done
}

# query EXPR: Prometheus's instant query on the published port, as
# "LABELVALUE VALUE" lines (LABELVALUE: the series' worker label).
query() {
  "$PYTHON" - "http://127.0.0.1:$prometheus_port" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
with urllib.request.urlopen(url, timeout=10) as response:
    body = json.load(response)
if body.get("status") != "success":
    sys.exit("query failed: %s" % body)
for series in body["data"]["result"]:
    print(series["metric"].get("worker", "-"), series["value"][1])
PY
}

# min_steps: the fewest steps any of the 2 workers has reported (0 before
# both are scraped).
min_steps() {
  query 'gradwire_worker_steps_total' 2>/dev/null |
    awk '{ n++; if (min == "" || $2 < min) min = $2 } END { print (n == 2 ? min : 0) }'
}

steps_reached() { (($(min_steps) >= $1)); }

worker_exited() {
  [[ "$(inspect "$1" '{{.State.Status}}')" == exited ]]
}

restarted() {
  (($(inspect shard-0 '{{.RestartCount}}') >= 1)) &&
    [[ "$(inspect shard-0 '{{.State.Status}}')" == running ]]
}

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

show_logs() {
  local service
  for service in "${SERVICES[@]}"; do
    [[ -n "$(container "$service")" ]] || continue
    echo "---- $service (last 25 lines)" >&2
    "$ENGINE" logs --tail 25 "$(container "$service")" 2>&1 | sed 's/^/  /' >&2
  done
}

# leftovers: the project's containers, volumes and networks, one a line.
leftovers() {
  local label="label=com.docker.compose.project=$project"
  {
    "$ENGINE" ps -a --filter "$label" --format 'container {{.Names}}'
    "$ENGINE" ps -a --format 'container {{.Names}}' | grep -E "^container ${project}[-_]" || true
    "$ENGINE" volume ls --filter "$label" --format 'volume {{.Name}}'
    "$ENGINE" volume ls --format 'volume {{.Name}}' | grep -E "^volume ${project}[-_]" || true
    "$ENGINE" network ls --filter "$label" --format 'network {{.Name}}'
    "$ENGINE" network ls --format 'network {{.Name}}' | grep -E "^network ${project}[-_]" || true
  } | sort -u
}

# down: `compose down -v`, and whatever podman-compose 1.0.3 leaves: it
# removes no network (its own bug, fixed in later releases), so the
# project's networks go by their label.
down() {
  compose down -v -t 10 >"$WORK/down.log" 2>&1 || {
    cat "$WORK/down.log" >&2
    return 1
  }
  if [[ "${COMPOSE[0]}" == podman-compose ]]; then
    local network
    for network in $(podman network ls -q --filter "label=io.podman.compose.project=$project"); do
      log "podman-compose left network $network: removing it"
      podman network rm "$network" >/dev/null
    done
  fi
}

# Waits for container $1's built-in health check to pass; on failure shows
# its log. Removes the container either way (rm -v: Prometheus's image
# declares a volume, made anew for each run).
await_built_in_check() {
  local name=$1 what=$2 ok=0
  if [[ "$ENGINE" == podman ]]; then
    wait_for 60 "$what" podman healthcheck run "$name" || ok=1
  else
    wait_for 90 "$what" \
      bash -c "[[ \$(docker inspect --format '{{.State.Health.Status}}' $name) == healthy ]]" || ok=1
  fi
  [[ $ok == 0 ]] || "$ENGINE" logs "$name" >&2
  "$ENGINE" rm -f -v "$name" >/dev/null
  [[ $ok == 0 ]] && log "$what passes in a container"
  return $ok
}

# The images on their own: non-root users, and working health checks, the
# server's also over mutual TLS, where it presents the probe's certificate
# (GRADWIRE_PROBE_TLS_CERT and _KEY, deploy/docker/healthcheck.sh).
check_images() {
  local image uid name tls=$WORK/tls-image
  for image in "${IMAGES[@]}"; do
    uid=$("$ENGINE" run --rm --entrypoint id "$image:latest" -u)
    [[ "$uid" != 0 ]] || fail "$image runs as root" || return 1
    log "$image runs as uid $uid"
  done
  for image in gradwire-server gradwire-prometheus; do
    name="gradwire-image-check-$$-${image#gradwire-}"
    "$ENGINE" run -d --name "$name" "$image:latest" >/dev/null
    await_built_in_check "$name" "$image's built-in health check" || return 1
  done
  scripts/dev-certs.sh "$tls" >"$WORK/dev-certs-image.log" 2>&1 ||
    { cat "$WORK/dev-certs-image.log" >&2; return 1; }
  chown 10001 "$tls"/*.key "$tls/auth-token" "$tls"/worker-token*
  name="gradwire-image-check-$$-server-tls"
  "$ENGINE" run -d --name "$name" -v "$tls:/tls:ro" \
    -e GRADWIRE_TLS_CERT=/tls/server.pem -e GRADWIRE_TLS_KEY=/tls/server.key \
    -e GRADWIRE_TLS_CA=/tls/ca.pem -e GRADWIRE_TLS_REQUIRE_CLIENT_CERT=true \
    -e GRADWIRE_AUTH_TOKEN_FILE=/tls/auth-token \
    -e GRADWIRE_PROBE_TLS_CERT=/tls/probe.pem \
    -e GRADWIRE_PROBE_TLS_KEY=/tls/probe.key gradwire-server:latest >/dev/null
  await_built_in_check "$name" "gradwire-server's built-in health check over mutual TLS"
}

# The pushed bytes of each worker: summary against Prometheus.
compare_bytes() {
  local worker summary_bytes scraped ok=0
  query 'last_over_time(gradwire_worker_sent_bytes_total{rpc="push"}[1h])' >"$WORK/scraped"
  for worker in 0 1; do
    "$ENGINE" cp "$(container "worker-$worker"):/var/lib/gradwire/summary.json" "$WORK/summary-$worker.json" ||
      fail "worker-$worker wrote no summary" || return 1
    read -r summary_bytes summary_steps < <("$PYTHON" -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(s["pushed_bytes"], s["steps"])' "$WORK/summary-$worker.json")
    [[ "$summary_steps" == "$STEPS" ]] ||
      fail "worker-$worker trained $summary_steps steps, not $STEPS" || ok=1
    scraped=$(awk -v w="$worker" '$1 == w { print $2 }' "$WORK/scraped")
    if [[ -z "$scraped" ]]; then
      fail "Prometheus has no pushed bytes of worker $worker" || ok=1
    elif [[ "$("$PYTHON" -c 'import sys; print(int(float(sys.argv[1])))' "$scraped")" != "$summary_bytes" ]]; then
      fail "worker $worker: Prometheus scraped $scraped pushed bytes, its summary says $summary_bytes" || ok=1
    else
      log "worker $worker: $summary_bytes pushed bytes in its summary and in Prometheus, $summary_steps steps"
    fi
  done
  return $ok
}

# One config, from up to down.
run_config() {
  local config=$1 service deadline
  project="gradwire-compose-test-$config-$$"
  compose_files=(docker-compose.yml)
  export GRADWIRE_TLS_DIR=$WORK/tls-$config
  if [[ "$config" == plaintext ]]; then
    compose_files+=(docker-compose.plaintext.yml)
  else
    scripts/dev-certs.sh "$GRADWIRE_TLS_DIR" >"$WORK/dev-certs.log" 2>&1 ||
      { cat "$WORK/dev-certs.log" >&2; return 1; }
    # The containers run as uid 10001; the keys and the tokens are 0600.
    chown 10001 "$GRADWIRE_TLS_DIR"/*.key "$GRADWIRE_TLS_DIR/auth-token" \
      "$GRADWIRE_TLS_DIR"/worker-token*
  fi
  prometheus_port=$(free_port)
  export GRADWIRE_PROMETHEUS_PORT=$prometheus_port GRADWIRE_MAX_STEPS=$STEPS
  deadline=$((SECONDS + TIMEOUT))
  log "$config: ${COMPOSE[*]} -p $project ${compose_files[*]/#/-f } up -d (Prometheus on 127.0.0.1:$prometheus_port, $STEPS steps)"
  local up=(up -d)
  if [[ "${COMPOSE[0]}" == podman-compose ]]; then up+=("${SERVICES[@]}"); fi
  if ! compose "${up[@]}" >"$WORK/up.log" 2>&1; then
    tail -30 "$WORK/up.log" >&2
    fail "$config: compose up failed"
    return 1
  fi
  for service in shard-0 shard-1 prometheus; do
    wait_for 120 "$config: $service healthy" healthy "$service" || return 1
  done
  log "$config: shards and Prometheus healthy after $((SECONDS - deadline + TIMEOUT)) s"
  [[ -z "$(container grafana)" ]] || fail "$config: grafana started without its profile" || return 1

  wait_for $((deadline - SECONDS)) "$config: both workers at step $KILL_AT" steps_reached "$KILL_AT" || return 1
  local pid
  pid=$(inspect shard-0 '{{.State.Pid}}')
  log "$config: workers at step $(min_steps); SIGKILL to shard-0 (pid $pid)"
  kill -KILL "$pid"
  wait_for 120 "$config: shard-0 restarted" restarted || return 1
  wait_for 120 "$config: shard-0 healthy again" healthy shard-0 || return 1
  local replay
  replay=$("$ENGINE" logs "$(container shard-0)" 2>&1 | grep 'replayed write-ahead log' | tail -1 || true)
  if ! [[ "$replay" =~ \ ([1-9][0-9]*)\ records ]]; then
    fail "$config: restarted shard-0 replayed no write-ahead log from its volume (${replay:-no replay line})"
    return 1
  fi
  log "$config: shard-0 restarted from its volume: ${replay#*: }"

  for service in worker-0 worker-1; do
    wait_for $((deadline - SECONDS)) "$config: $service done" worker_exited "$service" || return 1
    [[ "$(inspect "$service" '{{.State.ExitCode}}')" == 0 ]] ||
      fail "$config: $service exited with $(inspect "$service" '{{.State.ExitCode}}')" || return 1
  done
  log "$config: both workers finished after $((SECONDS - deadline + TIMEOUT)) s"
  compare_bytes
}

finish_config() {
  local config=$1 result=$2 left
  if [[ $result -ne 0 ]]; then show_logs; fi
  if ! down; then
    fail "$config: compose down -v failed"
    result=1
  fi
  left=$(leftovers)
  if [[ -n "$left" ]]; then
    fail "$config: left after down -v: $(echo "$left" | tr '\n' ' ')"
    # Leave the machine clean all the same.
    echo "$left" | while read -r kind name; do "$ENGINE" "$kind" rm -f "$name" >/dev/null 2>&1 || true; done
    result=1
  else
    log "$config: down -v left no container, network or volume"
  fi
  if [[ $result -eq 0 ]]; then
    passed=$((passed + 1))
    log "ok: $config"
  else
    failed=$((failed + 1))
  fi
}

cleanup() {
  if [[ -n "$project" && -n "$(leftovers 2>/dev/null)" ]]; then down >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

log "engine $ENGINE, compose ${COMPOSE[*]}"
if check_images; then
  passed=$((passed + 1))
  log "ok: images"
else
  failed=$((failed + 1))
fi
project=""
for config in "${CONFIGS[@]}"; do
  case "$config" in
    tls | plaintext) ;;
    *) echo "usage: $0 [tls|plaintext]..." >&2; exit 2 ;;
  esac
  config_start=$SECONDS
  result=0
  run_config "$config" || result=1
  finish_config "$config" "$result"
  log "$config: $((SECONDS - config_start)) s"
done
log "$((SECONDS - started)) s"
echo "compose-test: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
