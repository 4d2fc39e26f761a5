#!/usr/bin/env bash
# Build (once) the base image the Dockerfile starts from, out of Debian packages, for
# machines that cannot pull images from a registry (CI, air-gapped hosts).
#
# The Dockerfile starts from the official python:3.11-slim-bookworm image. Where it cannot
# be pulled, this script makes a stand-in under the same name: a minimal Debian 12
# (bookworm) root filesystem made by debootstrap with Debian's Python 3.11 and its venv
# module, stripped of documentation like Debian's slim images, imported into podman. The
# Dockerfile only runs `python3 -m venv` and the venv's own programs, so it builds the same
# on either. An image already present under that name (the real one, or an earlier run) is
# kept; the root filesystem is cached as a tarball under ~/.cache/threadwise/base-image.
#
# The host's extra CA certificates (/usr/local/share/ca-certificates/*.crt, e.g. a TLS
# proxy in front of the package index) are added to the image so that pip inside the build
# trusts what the host's pip trusts.
#
# Usage: scripts/build-base-image.sh [TAG]
# Env:   DEBIAN_MIRROR (default: the first mirror of the host's apt sources, else
#        http://deb.debian.org/debian), THREADWISE_CACHE (default ~/.cache/threadwise),
#        CONTAINERS_CONF (podman's settings; .ci/containers.conf works on hosts with hybrid cgroups)
set -euo pipefail
TAG=${1:-docker.io/library/python:3.11-slim-bookworm}
CACHE=${THREADWISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/threadwise}/base-image
TARBALL=$CACHE/bookworm-python3.11.tar

if podman image exists "$TAG"; then
  echo "base image $TAG is present" >&2
  exit 0
fi
if [ ! -s "$TARBALL" ]; then
  command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
  mirror=${DEBIAN_MIRROR:-$(grep -hoE '^(deb|URIs:) +[^ ]*https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | grep -oE 'https?://[^ ]+' | grep -v security | head -n1 || true)}
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "debootstrap bookworm from $mirror (a few minutes, once)" >&2
  mkdir -p "$CACHE"
  rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$mirror" >&2
  # what Debian's slim images leave out: documentation, manual pages, translations, apt's lists
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*
  if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  tar -C "$rootfs" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
fi
podman import --change 'CMD ["python3"]' --change 'ENV LANG=C.UTF-8' "$TARBALL" "$TAG" >/dev/null
echo "base image $TAG imported from $TARBALL" >&2
