#!/usr/bin/env bash
# Benchmark: `builder mirror` registry to registry against `skopeo sync` on
# the same images of the demo release, side by side. Two Debian
# docker-registry instances on loopback; the demo release is published
# to the first; each round mirrors it into a fresh prefix of the second,
# builder and skopeo alternating, ROUNDS times (default 5). Not part of CI.
#
#   scripts/bench-mirror.sh [WORKDIR]
#
# skopeo is run twice: on the 7 release tags (the images and their
# children, nothing else), and on every tag of the release repositories
# (the release tags, cosign's .sig/.att tags and the referrers fallback
# tags, whose index lists the OCI referrers: the same manifests builder
# carries). builder carries the release with every signature, attestation
# and referrer (77 manifests), checks parity at the destination, and with
# --key verifies them there.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/nodeforge-bench-mirror}
rm -rf "$work" && mkdir -p "$work"
B=$work/builder
CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}" go build -o "$B" ./cmd/builder
command -v docker-registry >/dev/null || { echo "needs docker-registry (apt-get install docker-registry)"; exit 1; }
command -v skopeo >/dev/null || { echo "needs skopeo"; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
# start_registry NAME VAR: starts a registry and sets VAR to its host:port
# (not in a subshell, so the trap below knows its pid).
start_registry() {
  local port dir=$work/$1
  port=$(free_port)
  mkdir -p "$dir"
  printf 'version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  cache:\n    blobdescriptor: inmemory\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' "$dir/data" "$port" >"$dir/config.yml"
  docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done
  printf -v "$2" '127.0.0.1:%s' "$port"
}
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
start_registry src A
start_registry dst Z

echo "== the demo release, published to $A/nodeforge/p11"
"$B" demo-base --force "$work/demo" >/dev/null
export COSIGN_PASSWORD=bench
"$B" keys generate --out "$work/demo/keys/dev" >/dev/null
"$B" release -q --branch p11 --spec "$work/demo/spec.yaml" --cache "$work/cache" --registry "$A/nodeforge/p11" >/dev/null
V=$(awk '/^version:/ {print $2}' "$work/demo/spec.yaml")
repos=$(curl -fs "http://$A/v2/_catalog" | python3 -c 'import json,sys; print(" ".join(r.split("nodeforge/p11/")[1] for r in json.load(sys.stdin)["repositories"]))')
{
  echo "$A:"
  echo "  tls-verify: false"
  echo "  images:"
  for r in $repos; do echo "    nodeforge/p11/$r: [\"$V\"]"; done
} >"$work/skopeo-sync.yaml"
echo "repositories: $repos"
# Every tag of those repositories: what skopeo can carry of the
# signatures, attestations and referrers.
{
  echo "$A:"
  echo "  tls-verify: false"
  echo "  images:"
  for r in $repos; do
    tags=$(curl -fs "http://$A/v2/nodeforge/p11/$r/tags/list" | python3 -c 'import json,sys; print(", ".join(chr(34)+t+chr(34) for t in json.load(sys.stdin)["tags"]))')
    echo "    nodeforge/p11/$r: [$tags]"
  done
} >"$work/skopeo-sync-sigs.yaml"

# t CMD...: prints "wall-seconds peak-RSS-KB registries-CPU-ms" of CMD;
# the CPU is what both registries spent serving it (from /proc).
regcpu() { awk '{s += $14 + $15} END {print s * 10}' "/proc/${pids[0]}/stat" "/proc/${pids[1]}/stat"; }
t() {
  local c0 c1
  c0=$(regcpu)
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/out" 2>"$work/stderr" || { cat "$work/out" "$work/stderr"; exit 1; }
  c1=$(regcpu)
  echo "$(cat "$work/time") $((c1 - c0))"
}
: >"$work/b.times"; : >"$work/bk.times"; : >"$work/s.times"; : >"$work/ss.times"
for round in $(seq "${ROUNDS:-5}"); do
  t "$B" mirror --version "$V" "docker://$A/nodeforge/p11" "docker://$Z/b$round" >>"$work/b.times"
  t "$B" mirror --version "$V" --key "$work/demo/keys/dev/cosign.pub" "docker://$A/nodeforge/p11" "docker://$Z/bk$round" >>"$work/bk.times"
  t skopeo sync --all --src yaml --dest docker --dest-tls-verify=false "$work/skopeo-sync.yaml" "$Z/s$round" >>"$work/s.times"
  t skopeo sync --all --src yaml --dest docker --dest-tls-verify=false "$work/skopeo-sync-sigs.yaml" "$Z/ss$round" >>"$work/ss.times"
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mem() { awk '{print $2}' | sort -n | tail -1; }
regms() { cut -d' ' -f3 | median; }
bm=$(cut -d' ' -f1 "$work/b.times" | median); bkm=$(cut -d' ' -f1 "$work/bk.times" | median); sm=$(cut -d' ' -f1 "$work/s.times" | median); ssm=$(cut -d' ' -f1 "$work/ss.times" | median)

# What arrived: manifests, and whether cosign verifies there.
count_tags() { local total=0 n; for r in $(curl -fs "http://$Z/v2/_catalog?n=1000" | python3 -c "import json,sys; print(' '.join(r for r in json.load(sys.stdin)['repositories'] if r.startswith('$1/')))"); do
  n=$(curl -fs "http://$Z/v2/$r/tags/list" | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("tags") or []))'); total=$((total + n)); done; echo $total; }
verifies() { if cosign verify --key "$work/demo/keys/dev/cosign.pub" --insecure-ignore-tlog --allow-http-registry "$Z/$1/installer:$V" >/dev/null 2>&1; then echo yes; else echo no; fi; }
cosign_ok() { command -v cosign >/dev/null && verifies "$1" || echo "n/a (no cosign)"; }

printf '\n%-38s %10s %12s %14s %6s %s\n' "" "median s" "peak RSS KB" "registry CPU s" "tags" "cosign verify at destination"
printf '%-38s %10s %12s %14s %6s %s\n' "builder mirror" "$bm" "$(mem <"$work/b.times")" "$(regms <"$work/b.times" | awk '{printf "%.2f", $1/1000}')" "$(count_tags b1)" "$(cosign_ok b1)"
printf '%-38s %10s %12s %14s %6s %s\n' "builder mirror --key (verified)" "$bkm" "$(mem <"$work/bk.times")" "$(regms <"$work/bk.times" | awk '{printf "%.2f", $1/1000}')" "$(count_tags bk1)" "$(cosign_ok bk1)"
printf '%-38s %10s %12s %14s %6s %s\n' "skopeo sync --all (release tags)" "$sm" "$(mem <"$work/s.times")" "$(regms <"$work/s.times" | awk '{printf "%.2f", $1/1000}')" "$(count_tags s1)" "$(cosign_ok s1)"
printf '%-38s %10s %12s %14s %6s %s\n' "skopeo sync --all (every tag)" "$ssm" "$(mem <"$work/ss.times")" "$(regms <"$work/ss.times" | awk '{printf "%.2f", $1/1000}')" "$(count_tags ss1)" "$(cosign_ok ss1)"
echo "(rounds: ${ROUNDS:-5}; tags count the release tags plus cosign's .sig/.att and the referrers fallback tags)"
