#!/usr/bin/env bash
# Builds raftlock's release archives, reproducibly:
#
#   scripts/release.sh [OS/ARCH ...]      # default: linux/amd64 linux/arm64 darwin/arm64
#
# For each target, dist/raftlock_VERSION_OS_ARCH.tar.gz holds raftlockd and
# raftlock (static: CGO_ENABLED=0), LICENSE, README.md, CHANGELOG.md and
# THIRD_PARTY_LICENSES (the licence of every module linked into the
# binaries); dist/SHA256SUMS lists their SHA-256 sums.
#
# The same source gives the same bytes on any machine with the same Go
# version, in any directory: -trimpath (no build paths inside), -buildvcs=false
# and an empty build id (no VCS stamp), archive entries sorted, owned by 0:0
# and dated SOURCE_DATE_EPOCH (default: the commit time of HEAD), gzip without
# a name or time. CI builds linux/amd64 twice, from two directories, and
# compares the sums (RELEASE_CHECK=1).
#
# Environment: VERSION (default: the VERSION file), OUT (default: dist),
# SOURCE_DATE_EPOCH.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${VERSION:-$(cat VERSION)}"
out="${OUT:-dist}"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null) || {
    echo "release.sh: not in a git checkout: set SOURCE_DATE_EPOCH (seconds since 1970) for the archives' dates" >&2; exit 2; }
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux/amd64 linux/arm64 darwin/arm64)
case "$version" in
  *[!0-9A-Za-z.+-]*|"") echo "release.sh: version \"$version\" is not like 1.2.3" >&2; exit 2 ;;
esac

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ldflags="-s -w -buildid= -X github.com/raftlock/raftlock/cmd/internal/buildinfo.version=$version"
archives=()
for target in "${targets[@]}"; do
  goos=${target%/*} goarch=${target#*/}
  name="raftlock_${version}_${goos}_${goarch}"
  dir="$work/$name"
  mkdir -p "$dir"
  for cmd in raftlockd raftlock; do
    CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -buildvcs=false \
      -ldflags "$ldflags" -o "$dir/$cmd" "./cmd/$cmd"
  done
  cp LICENSE README.md CHANGELOG.md "$dir/"
  # Every module linked into the two binaries, with its licence file(s).
  GOOS=$goos GOARCH=$goarch go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' \
      ./cmd/raftlockd ./cmd/raftlock | sort -u | while read -r path ver mdir; do
    lic=$(find "$mdir" -maxdepth 1 -type f \( -iname 'LICENSE*' -o -iname 'LICENCE*' -o -iname 'COPYING*' \) | sort)
    if [ -z "$lic" ]; then echo "release.sh: $path $ver has no licence file" >&2; exit 1; fi
    for f in $lic; do
      printf '==== %s %s (%s)\n\n' "$path" "$ver" "$(basename "$f")"
      cat "$f"; printf '\n'
    done
  done > "$dir/THIRD_PARTY_LICENSES"
  chmod 0755 "$dir" "$dir/raftlockd" "$dir/raftlock"
  chmod 0644 "$dir/LICENSE" "$dir/README.md" "$dir/CHANGELOG.md" "$dir/THIRD_PARTY_LICENSES"
  tar --sort=name --format=gnu --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -C "$work" -cf - "$name" | gzip -n -9 > "$out/$name.tar.gz"
  archives+=("$name.tar.gz")
  echo "built $out/$name.tar.gz"
done
(cd "$out" && sha256sum "${archives[@]}" > SHA256SUMS && cat SHA256SUMS)

# RELEASE_CHECK=1: build the first target again from a copy of the tree in
# another directory and compare the sums.
if [ "${RELEASE_CHECK:-}" = 1 ]; then
  copy="$work/elsewhere/src"
  mkdir -p "$copy"
  git ls-files -z | xargs -0 cp --parents -t "$copy"
  (cd "$copy" && RELEASE_CHECK= VERSION="$version" OUT="$work/elsewhere/dist" SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
    bash scripts/release.sh "${targets[0]}" >/dev/null)
  a=$(cd "$out" && sha256sum "${archives[0]}")
  b=$(cd "$work/elsewhere/dist" && sha256sum "${archives[0]}")
  if [ "$a" != "$b" ]; then
    echo "release.sh: NOT REPRODUCIBLE: $a here, $b from $copy" >&2; exit 1
  fi
  echo "reproducible: ${archives[0]} is the same from two directories ($a)"
fi
