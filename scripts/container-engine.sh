#!/usr/bin/env bash
# Finds the container engine and its compose tool; sourced by
# scripts/base-images.sh, scripts/images.sh and tests/compose/compose-test.sh.
#
# Sets ENGINE (docker or podman) and COMPOSE (an array: docker compose,
# docker-compose or podman-compose), or leaves ENGINE empty and says why in
# ENGINE_PROBLEM when no engine can run a container here.
#
#   GRADWIRE_ENGINE=docker|podman   use that engine (default: Docker where its
#                                   daemon answers, else podman).
#   GRADWIRE_CONTAINERS_CONF=FILE   podman's settings (default
#                                   deploy/docker/containers.conf; empty: the
#                                   engine's own). Passed as CONTAINERS_CONF,
#                                   and only where CONTAINERS_CONF is not set
#                                   already: nothing under /etc changes, and a
#                                   user's own setting wins.
#
# Without an engine, sourcing it exits 1 after saying why; with --require it
# exits 77 (the test suites' "skipped") instead where no engine can run here
# at all (not where GRADWIRE_ENGINE names one that fails).

# ENGINE, ENGINE_PROBLEM and COMPOSE are for the scripts that source this.
# shellcheck disable=SC2034

# Docker counts only when its daemon answers: a client alone runs nothing.
engine_docker_works() {
  command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1
}

engine_podman_works() {
  command -v podman >/dev/null && timeout 60 podman info >/dev/null 2>&1
}

engine_find() {
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if [[ -z "${CONTAINERS_CONF+set}" ]]; then
    local conf=${GRADWIRE_CONTAINERS_CONF-$repo/deploy/docker/containers.conf}
    if [[ -n "$conf" ]]; then export CONTAINERS_CONF=$conf; fi
  fi
  ENGINE=""
  ENGINE_PROBLEM=""
  # Only "nothing here can run a container" is a skip; a chosen engine that
  # fails is an error.
  ENGINE_NONE=false
  COMPOSE=()
  case "${GRADWIRE_ENGINE:-}" in
    docker)
      engine_docker_works && ENGINE=docker ||
        ENGINE_PROBLEM="GRADWIRE_ENGINE=docker, but \`docker info\` fails (is the daemon running?)"
      ;;
    podman)
      engine_podman_works && ENGINE=podman ||
        ENGINE_PROBLEM="GRADWIRE_ENGINE=podman, but \`podman info\` fails"
      ;;
    "")
      if engine_docker_works; then
        ENGINE=docker
      elif engine_podman_works; then
        ENGINE=podman
      elif command -v podman >/dev/null; then
        ENGINE_NONE=true
        ENGINE_PROBLEM="no Docker daemon, and podman is installed but \`podman info\` fails: $(timeout 60 podman info 2>&1 | tail -1)"
      else
        ENGINE_NONE=true
        ENGINE_PROBLEM="neither a Docker daemon nor podman is available (scripts/install-deps.sh installs podman)"
      fi
      ;;
    *) ENGINE_PROBLEM="GRADWIRE_ENGINE=$GRADWIRE_ENGINE: must be docker or podman" ;;
  esac
  [[ -n "$ENGINE" ]] || return 0
  if [[ "$ENGINE" == docker ]]; then
    if docker compose version >/dev/null 2>&1; then
      COMPOSE=(docker compose)
    elif command -v docker-compose >/dev/null; then
      COMPOSE=(docker-compose)
    fi
  elif command -v podman-compose >/dev/null; then
    COMPOSE=(podman-compose)
  fi
}

engine_find
if [[ -z "$ENGINE" ]]; then
  if [[ "${1:-}" == "--require" ]] && $ENGINE_NONE; then
    echo "SKIPPED: no container engine can run here: $ENGINE_PROBLEM" >&2
    exit 77
  fi
  echo "no container engine: $ENGINE_PROBLEM" >&2
  exit 1
fi
