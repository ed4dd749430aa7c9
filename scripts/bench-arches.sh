#!/usr/bin/env bash
# Benchmark (issue 19): the build of the two-architecture test base
# (x86_64 and aarch64, Debian's kernels) against the x86_64-only one on the
# same packages. Nothing is emulated: the second architecture should cost
# no more than the first. Not part of CI.
#
#   scripts/bench-arches.sh [WORKDIR]
#
# Downloads cached, step caches and build stamps empty in every round;
# ROUNDS (default 3) alternating rounds, medians of wall and CPU time.
# Needs the Debian packages of scripts/fetch-test-kernel.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/nodeforge-bench-arches}
rounds=${ROUNDS:-3}
mkdir -p "$work"
work=$(cd "$work" && pwd)
export CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}"
B=${BUILDER:-$work/builder}
[ -n "${BUILDER:-}" ] || go build -o "$B" ./cmd/builder

median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for arches in x86_64 x86_64,aarch64; do
  [ -s "$work/base-$arches/spec.yaml" ] || go run ./pkgbase/testbase/mkbase -dir "$work/base-$arches" -arch "$arches" >/dev/null
  "$B" lock -q --spec "$work/base-$arches/spec.yaml" --cache "$work/cache"
  : >"$work/$arches.wall"; : >"$work/$arches.cpu"
done
for round in $(seq "$rounds"); do
  for arches in x86_64 x86_64,aarch64; do
    rm -rf "$work/cache/laid" "$work/cache/squashfs-packs" "$work/cache/builds" "$work/out-$arches"
    /usr/bin/time -f '%e %U %S' -o "$work/t" "$B" build -q --spec "$work/base-$arches/spec.yaml" --cache "$work/cache" --out "$work/out-$arches" >/dev/null
    read -r wall user sys <"$work/t"
    echo "$wall" >>"$work/$arches.wall"
    echo "$user $sys" | awk '{print $1 + $2}' >>"$work/$arches.cpu"
    echo "round $round, $arches: ${wall} s wall, $(tail -1 "$work/$arches.cpu") s CPU"
  done
done
one=$(median "$work/x86_64.wall"); two=$(median "$work/x86_64,aarch64.wall")
echo "medians: x86_64 ${one} s wall ($(median "$work/x86_64.cpu") s CPU); x86_64+aarch64 ${two} s wall ($(median "$work/x86_64,aarch64.cpu") s CPU)"
awk -v a="$one" -v b="$two" 'BEGIN { printf "the second architecture costs %.2f x the first\n", (b - a) / a }'
