#!/usr/bin/env bash
# Build (once) the images that the Dockerfile and compose.yaml start from, out of Debian
# packages, for machines that cannot pull images from a registry (CI, air-gapped hosts).
#
#   scripts/build-base-image.sh python     -> docker.io/library/python:3.11-slim-bookworm
#   scripts/build-base-image.sh postgres   -> docker.io/library/postgres:15-bookworm
#
# The Dockerfile starts from the official python:3.11-slim-bookworm image and compose.yaml
# runs the official postgres:15-bookworm. Where they cannot be pulled, this script makes a
# stand-in under the same name: a minimal Debian 12 (bookworm) root filesystem made by
# debootstrap, stripped of documentation like Debian's slim images, imported into podman.
#   python:   Debian's Python 3.11 and its venv module. The Dockerfile only runs
#             `python3 -m venv` and the venv's own programs, so it builds the same on either.
#   postgres: Debian's PostgreSQL 15 with an entry point that does what the official image's
#             does with POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB on first start
#             (scripts/postgres-entrypoint.sh).
# An image already present under that name (the real one, or an earlier run) is kept; the
# root filesystem is cached as a tarball under ~/.cache/threadwise/base-image.
#
# The host's extra CA certificates (/usr/local/share/ca-certificates/*.crt, e.g. a TLS
# proxy in front of the package index) are added to the image so that pip inside the build
# trusts what the host's pip trusts.
#
# Env:   DEBIAN_MIRROR (default: the first mirror of the host's apt sources, else
#        http://deb.debian.org/debian), THREADWISE_CACHE (default ~/.cache/threadwise),
#        CONTAINERS_CONF (podman's settings; .ci/containers.conf works on hosts with hybrid cgroups)
set -euo pipefail
KIND=${1:-python}
HERE=$(cd "$(dirname "$0")" && pwd)
case "$KIND" in
  python)
    TAG=docker.io/library/python:3.11-slim-bookworm
    PACKAGES=python3,python3-venv,ca-certificates
    CHANGES=(--change 'CMD ["python3"]' --change 'ENV LANG=C.UTF-8') ;;
  postgres)
    TAG=docker.io/library/postgres:15-bookworm
    PACKAGES=postgresql-15,ca-certificates
    CHANGES=(--change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' --change 'CMD ["postgres"]'
             --change 'ENV LANG=C.UTF-8' --change 'ENV PGDATA=/var/lib/postgresql/data'
             --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
             --change 'EXPOSE 5432' --change 'STOPSIGNAL SIGINT') ;;
  *) echo "usage: $0 python|postgres" >&2; exit 2 ;;
esac
CACHE=${THREADWISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/threadwise}/base-image
TARBALL=$CACHE/bookworm-$KIND.tar

if podman image exists "$TAG"; then
  echo "base image $TAG is present" >&2
  exit 0
fi
if [ ! -s "$TARBALL" ]; then
  command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
  mirror=${DEBIAN_MIRROR:-$(grep -hoE '^(deb|URIs:) +[^ ]*https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | grep -oE 'https?://[^ ]+' | grep -v security | head -n1 || true)}
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "debootstrap bookworm ($PACKAGES) from $mirror (a few minutes, once)" >&2
  mkdir -p "$CACHE"
  rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "$mirror" >&2
  # what Debian's slim images leave out: documentation, manual pages, translations, apt's lists and archives
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*
  if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
  fi
  if [ "$KIND" = postgres ]; then
    install -m 0755 "$HERE/postgres-entrypoint.sh" "$rootfs/usr/local/bin/docker-entrypoint.sh"
    # Debian's package made a cluster in /var/lib/postgresql/15/main: the entry point makes its own in $PGDATA
    rm -rf "$rootfs"/var/lib/postgresql/15 "$rootfs"/etc/postgresql/15
  fi
  tar -C "$rootfs" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
fi
podman import "${CHANGES[@]}" "$TARBALL" "$TAG" >/dev/null
echo "base image $TAG imported from $TARBALL" >&2
