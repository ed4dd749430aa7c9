#!/usr/bin/env bash
# Benchmark (issue 17): the Image Factory on the demo release. Not part of CI.
#
#   scripts/bench-factory.sh [WORKDIR]
#
#   cold    a new schematic's ISO requested from the factory (composed on
#           demand) against builder image --release --kind iso for the same
#           schematic, medians of ROUNDS (default 5), each round a schematic
#           never seen before;
#   cached  the same cached ISO downloaded by 16 concurrent clients, REPEAT
#           (default 20) times each, from the factory and from Python's
#           static file server serving the same file: throughput of each;
#   small   requests per second and p99 latency for a cached cmdline, a PXE
#           script and a schematic (1000 requests, 16 at once);
#   rss     the factory's peak resident memory over all of it.
#
# BENCH_BASE=real runs scripts/bench-factory-real.sh instead (issue 41:
# the factory on a release of the real base, against its floors).
set -euo pipefail
if [ "${BENCH_BASE:-demo}" = real ]; then exec "$(dirname "$0")/bench-factory-real.sh" "$@"; fi
[ "${BENCH_BASE:-demo}" = demo ] || { echo "bench-factory: BENCH_BASE is demo or real, not $BENCH_BASE" >&2; exit 2; }
cd "$(dirname "$0")/.."
work=$(mkdir -p "${1:-/tmp/nodeforge-bench-factory}" && cd "${1:-/tmp/nodeforge-bench-factory}" && pwd)
B=$work/builder
CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}" go build -o "$B" ./cmd/builder
export COSIGN_PASSWORD=bench
rounds=${ROUNDS:-5} repeat=${REPEAT:-20} port=${PORT:-18080} sport=${SPORT:-18081}

rm -rf "$work/demo" "$work/cache"
"$B" demo-base "$work/demo" >/dev/null
"$B" keys generate --out "$work/demo/keys/dev" >/dev/null
"$B" release -q --branch p11 --spec "$work/demo/spec.yaml" --cache "$work/cache" --key "$work/demo/keys/dev/cosign.key" >/dev/null
store=oci:$work/demo/release/dev pub=$work/demo/keys/dev/cosign.pub
version=$(awk '/^version:/ {print $2}' "$work/demo/spec.yaml")

rm -rf "$work/demo/release/factory-cache"
"$B" factory serve --release "$store" --key "$pub" --signing-key "$work/demo/keys/dev/cosign.key" \
  --listen "127.0.0.1:$port" 2>"$work/factory.log" &
fpid=$!
trap 'kill $fpid 2>/dev/null || true; kill ${spid:-} 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
url=http://127.0.0.1:$port

# t CMD...: wall seconds of CMD.
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

: >"$work/cold.f" && : >"$work/cold.b"
for r in $(seq "$rounds"); do
  sch=$work/sch-$r.yaml
  printf 'customization:\n  extraKernelArgs: [bench.round=%s.%s]\n  systemExtensions:\n    officialExtensions: [zfs]\n' "$r" "$RANDOM" >"$sch"
  id=$(curl -sf --data-binary @"$sch" "$url/schematics" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  t curl -sf -o "$work/cold.iso" "$url/image/$id/$version/metal-amd64.iso" >>"$work/cold.f"
  t "$B" image -q --release "$store" --version "$version" --key "$pub" --schematic "$sch" --kind iso --compress '' --out "$work/img-$r" >>"$work/cold.b"
done
cold_f=$(median <"$work/cold.f") cold_b=$(median <"$work/cold.b")

# Cached: the last round's ISO, warm in the factory's cache.
iso_url=$url/image/$id/$version/metal-amd64.iso
curl -sf -o "$work/static.iso" "$iso_url"
size=$(stat -c %s "$work/static.iso")
(cd "$work" && exec python3 -m http.server "$sport" --bind 127.0.0.1 >/dev/null 2>&1) &
spid=$!
sleep 1
fetch_all() { # URL: 16 clients, $repeat downloads each; prints wall seconds
  local s e; s=$(date +%s.%N)
  for _ in $(seq 16); do (for _ in $(seq "$repeat"); do curl -sf -o /dev/null "$1"; done) & done
  wait; e=$(date +%s.%N); echo "$e - $s" | bc
}
tf=$(fetch_all "$iso_url") ts=$(fetch_all "http://127.0.0.1:$sport/static.iso")
mb=$(echo "16 * $repeat * $size / 1048576" | bc -l)

# Small artifacts.
small() { # URL: 1000 requests, 16 at once; prints "rps p99-ms"
  seq 1000 | xargs -P 16 -I{} curl -s -o /dev/null -w '%{time_total}\n' "$1" >"$work/lat"
  sort -n "$work/lat" | awk -v n=1000 '{a[NR]=$1; s+=$1} END {printf "%.0f %.1f\n", n / (s / 16), a[int(n * 0.99)] * 1000}'
}
read -r c_rps c_p99 < <(small "$url/image/$id/$version/cmdline-metal-amd64")
read -r p_rps p_p99 < <(small "$url/pxe/$id/$version/metal-amd64")
read -r s_rps s_p99 < <(small "$url/schematics/$id")
rss=$(awk '/VmHWM/ {print $2}' "/proc/$fpid/status")

cat <<EOF | tee "$work/summary"
factory benchmark, demo release $version, $(nproc) cores, $rounds rounds
cold ISO (new schematic): factory $cold_f s, builder image --release $cold_b s: $(echo "$cold_f / $cold_b" | bc -l | cut -c1-4)x (target <= 1.1)
cached ISO, 16 clients x $repeat: factory $(echo "$mb / $tf" | bc -l | cut -c1-6) MiB/s, static server $(echo "$mb / $ts" | bc -l | cut -c1-6) MiB/s: $(echo "$ts / $tf" | bc -l | cut -c1-4)x (target >= 0.9)
small: cmdline $c_rps req/s p99 $c_p99 ms; pxe $p_rps req/s p99 $p_p99 ms; schematic $s_rps req/s p99 $s_p99 ms
factory peak RSS: $((rss / 1024)) MiB (target < 200 MiB)
EOF

# Instances on registries (transfer, replicas): their own script.
if command -v docker-registry >/dev/null; then
  kill $fpid 2>/dev/null || true
  scripts/bench-factory-instances.sh "$work/instances"
fi
