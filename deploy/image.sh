#!/usr/bin/env bash
# Builds raftlock's container image from deploy/Dockerfile:
#
#   deploy/image.sh [ARCH]          # default amd64; tag raftlock:VERSION
#
# The binaries come from scripts/release.sh (the release archive's bytes).
# Uses docker when its daemon answers, else podman. IMAGE_CHECK=1 then
# checks the image: under 40 MB, the OCI labels (version, licence), a
# non-root user, /data a volume owned by it, the entrypoint /raftlockd.
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-amd64}"
version="${VERSION:-$(cat VERSION)}"
if docker info >/dev/null 2>&1; then rt=docker
elif command -v podman >/dev/null 2>&1; then rt=podman
else echo "image.sh: no container runtime: docker's daemon does not answer and podman is not installed" >&2; exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
OUT="$work/dist" VERSION="$version" bash scripts/release.sh "linux/$arch" >/dev/null
tar -xzf "$work/dist/raftlock_${version}_linux_${arch}.tar.gz" -C "$work"
ctx="$work/raftlock_${version}_linux_${arch}"
mkdir -p "$ctx/data"
tag="raftlock:$version"
"$rt" build --quiet --platform "linux/$arch" -f deploy/Dockerfile --build-arg VERSION="$version" -t "$tag" "$ctx" >/dev/null
echo "built $tag with $rt"
if [ "${IMAGE_CHECK:-}" = 1 ]; then
  size=$("$rt" image inspect "$tag" --format '{{.Size}}')
  labels=$("$rt" image inspect "$tag" --format '{{index .Config.Labels "org.opencontainers.image.version"}} {{index .Config.Labels "org.opencontainers.image.licenses"}}')
  user=$("$rt" image inspect "$tag" --format '{{.Config.User}}')
  entry=$("$rt" image inspect "$tag" --format '{{json .Config.Entrypoint}} {{json .Config.Volumes}}')
  echo "image $tag: $size bytes, labels: $labels, user $user, entrypoint and volumes $entry"
  fail=""
  [ "$size" -lt $((40 * 1000 * 1000)) ] || fail="$fail size $size >= 40 MB;"
  [ "$labels" = "$version Apache-2.0" ] || fail="$fail labels \"$labels\";"
  [ "$user" = "65532:65532" ] || fail="$fail user \"$user\";"
  case "$entry" in '["/raftlockd"] {"/data":{}}') ;; *) fail="$fail entrypoint/volumes $entry;" ;; esac
  # /data must belong to the user the server runs as: look in the layers.
  mkdir "$work/saved"
  "$rt" save -o "$work/saved/image.tar" "$tag" >/dev/null 2>&1
  tar -xf "$work/saved/image.tar" -C "$work/saved"
  owner=""
  while IFS= read -r -d '' layer; do
    o=$(tar -tvf "$layer" 2>/dev/null | awk '$NF == "data/" || $NF == "./data/" {print $2}' | tail -1) || true
    [ -n "$o" ] && owner=$o
  done < <(find "$work/saved" -type f ! -name image.tar -print0)
  echo "image $tag: /data owned by $owner"
  # No container can run on every machine (crun may not set rlimits in a
  # sandbox): run the image's entrypoint, taken from its layers, as a plain
  # process.
  mkdir "$work/rootfs"
  while IFS= read -r -d '' layer; do
    tar -xf "$layer" -C "$work/rootfs" raftlockd 2>/dev/null || true
  done < <(find "$work/saved" -type f ! -name image.tar -print0)
  got=$("$work/rootfs/raftlockd" --version | head -1)
  echo "image $tag: /raftlockd --version: $got"
  [ "$got" = "raftlockd $version" ] || fail="$fail entrypoint --version \"$got\";"
  [ "$owner" = "65532/65532" ] || fail="$fail /data owned by \"$owner\";"
  if [ -n "$fail" ]; then echo "image.sh: the image is wrong:$fail" >&2; exit 1; fi
fi
