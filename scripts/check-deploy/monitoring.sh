# shellcheck shell=bash
# Sourced by scripts/check-deploy.sh, which runs it from the repository root
# and defines OUT, TLS_DIR, BUILD and DRY_RUN_FLAG (see there).
# The prometheus, grafana and dashboard checks.
# Defines: prometheus grafana dashboard.

prometheus() {
  promtool check config deploy/prometheus/prometheus.yml
}

grafana() {
  local files
  files=$(find deploy/grafana/provisioning -name '*.yml' -o -name '*.yaml' | sort)
  if [[ -z "$files" ]]; then
    echo "no Grafana provisioning files in deploy/grafana/provisioning" >&2
    return 1
  fi
  # shellcheck disable=SC2086 # one file name a word
  node deploy/validate/check-yaml.mjs $files
}

# The metric names of the dashboards' queries must be among the string
# literals of the files that register the families.
METRIC_SOURCES=(worker/worker_metrics.cc worker/auto_compression.cc
  server/shard/shard_metrics.cc common/metrics/process_metrics.cc)

dashboard() {
  local dashboards datasources file args=()
  dashboards=$(find deploy/grafana/dashboards -name '*.json' | sort)
  datasources=$(find deploy/grafana/provisioning/datasources -name '*.yml' -o -name '*.yaml' | sort)
  if [[ -z "$dashboards" ]]; then
    echo "no dashboards in deploy/grafana/dashboards" >&2
    return 1
  fi
  for file in $datasources; do args+=(--datasources "$file"); done
  for file in "${METRIC_SOURCES[@]}"; do args+=(--source "$file"); done
  # shellcheck disable=SC2086 # one file name a word
  node deploy/validate/check-dashboard.mjs "${args[@]}" \
    --consoles deploy/prometheus/consoles $dashboards
}
