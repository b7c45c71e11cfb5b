# shellcheck shell=bash
# Sourced by scripts/check-deploy.sh, which runs it from the repository root
# and defines OUT, TLS_DIR, BUILD and DRY_RUN_FLAG (see there).
# The images and scripts checks.
# Defines: images shell_scripts.

images() {
  local dockerfile source ok=0 role pkg
  for dockerfile in deploy/docker/Dockerfile deploy/docker/Dockerfile.cuda deploy/prometheus/Dockerfile; do
    # COPY SOURCE... DEST from the build context (not --from=STAGE).
    while read -r source; do
      if [[ ! -e "$source" ]]; then
        echo "$dockerfile copies $source, which does not exist" >&2
        ok=1
      fi
    done < <(awk '$1 == "COPY" && $2 !~ /^--from/ { for (i = 2; i < NF; i++) print $i }' "$dockerfile")
  done
  if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
    echo "apt has no package lists (apt-get update): run-time packages not checked"
    return $ok
  fi
  local wanted known
  for role in server worker prometheus; do
    wanted=$(scripts/install-deps.sh --print --runtime "$role" | sort -u)
    # shellcheck disable=SC2086 # one package name a word
    known=$(apt-cache show --no-all-versions $wanted 2>/dev/null |
      sed -n 's/^Package: //p' | sort -u)
    for pkg in $(comm -23 <(echo "$wanted") <(echo "$known")); do
      echo "scripts/install-deps.sh --runtime $role: no package $pkg in apt" >&2
      ok=1
    done
  done
  return $ok
}

shell_scripts() {
  if ! command -v shellcheck >/dev/null; then
    echo "shellcheck not installed: skipped"
    return 0
  fi
  # -x: with the groups check-deploy.sh sources.
  shellcheck -x scripts/check-deploy.sh scripts/install-deps.sh scripts/dev-certs.sh \
    scripts/container-engine.sh scripts/base-images.sh scripts/images.sh \
    tests/compose/compose-test.sh deploy/docker/check-binaries.sh
}
