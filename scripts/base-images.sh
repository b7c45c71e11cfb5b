#!/usr/bin/env bash
# Makes the Debian base images of deploy/docker/Dockerfile and
# deploy/prometheus/Dockerfile locally where they cannot be pulled:
# debian:bookworm and debian:bookworm-slim, each from Debian's archive with
# mmdebstrap (--variant=minbase) and imported into the container engine.
#
# An image that the engine already has is left alone, and so is one that it
# can pull from its registry: the local one is only a stand-in for the
# official image of the same tag, made of the same archive (the tag policy:
# docs/deploying.md, "Images").
#
#   bookworm       minbase: apt, dpkg and the essential packages.
#   bookworm-slim  the same without documentation, manual pages and
#                  locales, which, as in the official slim image, dpkg
#                  also leaves out of every package installed later.
#
# Usage: scripts/base-images.sh [--force] [--no-pull]
#   --force    make both anew, even where the engine has them.
#   --no-pull  do not try the registry first.
# Environment: the engine of scripts/container-engine.sh; DEBIAN_MIRROR
# (default http://deb.debian.org/debian) and DEBIAN_SECURITY_MIRROR
# (default http://deb.debian.org/debian-security).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/container-engine.sh
source scripts/container-engine.sh

force=false
pull=true
for arg in "$@"; do
  case "$arg" in
    --force) force=true ;;
    --no-pull) pull=false ;;
    *) echo "usage: $0 [--force] [--no-pull]" >&2; exit 2 ;;
  esac
done

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# The fully qualified name: `FROM debian:bookworm` resolves to it in both
# engines, so no registry is asked for an image that is here.
REPOSITORY=docker.io/library/debian

# What the official slim image leaves out of every package (its
# /etc/dpkg/dpkg.cfg.d/docker): the slim tarball drops these files, and the
# same lines go into the image for every package installed later.
SLIM_DPKG_CFG='path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/share/lintian/*
'

# As in the official images: apt deletes the packages it downloaded once
# they are installed, so that no image keeps them in a layer.
APT_CLEAN='DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";'

# slim_tarball IN OUT: IN without what SLIM_DPKG_CFG excludes, and with that
# file as /etc/dpkg/dpkg.cfg.d/slim. One mmdebstrap run makes both images.
slim_tarball() {
  SLIM_DPKG_CFG=$SLIM_DPKG_CFG /usr/bin/python3 - "$1" "$2" <<'PY'
import fnmatch, io, os, sys, tarfile

rules = [line.split("=", 1) for line in os.environ["SLIM_DPKG_CFG"].split()]

def kept(name):
    path = "/" + name.lstrip("./")
    keep = True  # as dpkg: the last matching rule wins
    for kind, pattern in rules:
        if fnmatch.fnmatch(path, pattern):
            keep = kind == "path-include"
    return keep

with tarfile.open(sys.argv[1]) as src, tarfile.open(sys.argv[2], "w") as dst:
    for member in src:
        if not kept(member.name):
            continue
        if member.islnk() and not kept(member.linkname):
            continue
        dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    cfg = os.environ["SLIM_DPKG_CFG"].encode()
    info = tarfile.TarInfo("./etc/dpkg/dpkg.cfg.d/slim")
    info.size, info.mode = len(cfg), 0o644
    dst.addfile(info, io.BytesIO(cfg))
PY
}

# import TARBALL TAG: the tarball as REPOSITORY:TAG in the engine.
import_base() {
  local old
  old=$("$ENGINE" image inspect --format '{{.Id}}' "$REPOSITORY:$2" 2>/dev/null || true)
  if ! "$ENGINE" import --change 'CMD ["bash"]' \
    --message "mmdebstrap --variant=minbase bookworm" \
    "$1" "$REPOSITORY:$2" >"$WORK/import.log" 2>&1; then
    cat "$WORK/import.log" >&2
    return 1
  fi
  # The image the tag named before (--force), unless other images use it.
  if [[ -n "$old" ]]; then "$ENGINE" rmi "$old" >/dev/null 2>&1 || true; fi
  echo "base-images: made $REPOSITORY:$2 locally ($(du -m "$1" | cut -f1) MB)"
}

missing=()
for tag in bookworm bookworm-slim; do
  if ! $force && "$ENGINE" image inspect "$REPOSITORY:$tag" >/dev/null 2>&1; then
    echo "base-images: $REPOSITORY:$tag is present"
  elif ! $force && $pull && timeout 120 "$ENGINE" pull -q "$REPOSITORY:$tag" >/dev/null 2>&1; then
    echo "base-images: pulled $REPOSITORY:$tag"
  else
    missing+=("$tag")
  fi
done
[[ ${#missing[@]} -gt 0 ]] || exit 0

command -v mmdebstrap >/dev/null || {
  echo "base-images: mmdebstrap is missing (scripts/install-deps.sh installs it)" >&2
  exit 1
}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
started=$SECONDS
printf '%s\n' "$APT_CLEAN" >"$WORK/docker-clean"
echo "base-images: no registry image of ${missing[*]}: making them with mmdebstrap from $MIRROR"
# The sources inside the image are the archive, its updates and security,
# as in the official image; apt's lists are left out (every image build runs
# apt-get update first). /usr is merged as debootstrap and the official
# images merge it (directory symlinks), not by the usrmerge package, which
# would bring perl into every image.
# shellcheck disable=SC2016 # "$1" is the hook's, the image's root
mmdebstrap --quiet --variant=minbase --format=tar \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --aptopt='Acquire::Retries "3"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  --customize-hook="upload $WORK/docker-clean /etc/apt/apt.conf.d/docker-clean" \
  bookworm "$WORK/bookworm.tar" \
  "deb $MIRROR bookworm main" \
  "deb $MIRROR bookworm-updates main" \
  "deb $SECURITY_MIRROR bookworm-security main"
for tag in "${missing[@]}"; do
  if [[ "$tag" == bookworm-slim ]]; then
    slim_tarball "$WORK/bookworm.tar" "$WORK/bookworm-slim.tar"
  fi
  import_base "$WORK/$tag.tar" "$tag"
done
echo "base-images: done in $((SECONDS - started)) s"
