#!/usr/bin/env bash
# Benchmark (issue 18): factory instances on real registries (Debian's
# docker-registry on loopback), demo release. Not part of CI.
#
#   scripts/bench-factory-instances.sh [WORKDIR]
#
#   transfer  builder factory transfer --cached of the release and SCHEMATICS
#             (default 10) cached schematics (kernel, initramfs, cmdline, ISO
#             and the installer each) to an empty registry, against crane cp
#             of the same tagged objects (the transfer's report lists them)
#             to another empty registry;
#   replicas  the cached ISO downloaded by 16 clients, REPEAT (default 10)
#             times each, spread over 1, 2 and 4 replicas on one cache
#             registry: throughput of each.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mkdir -p "${1:-/tmp/nodeforge-bench-instances}" && cd "${1:-/tmp/nodeforge-bench-instances}" && pwd)
B=$work/builder
CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}" go build -o "$B" ./cmd/builder
export COSIGN_PASSWORD=bench
n_sch=${SCHEMATICS:-10} repeat=${REPEAT:-10}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

# registry NAME PORT: a docker-registry on loopback with its own storage.
registry() {
  mkdir -p "$work/$1"
  cat >"$work/$1.yml" <<EOF
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/$1}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$2}
EOF
  docker-registry serve "$work/$1.yml" >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$2/v2/" >/dev/null && return; sleep 0.1; done
  echo "registry $1 did not start" >&2; exit 1
}
rm -rf "$work"/reg-* "$work/demo" "$work/cache"
registry reg-internal 15101
registry reg-transfer 15102
registry reg-crane 15103
"$B" demo-base "$work/demo" >/dev/null
"$B" keys generate --out "$work/demo/keys/dev" >/dev/null
from=127.0.0.1:15101/nodeforge/p11
"$B" release -q --branch p11 --spec "$work/demo/spec.yaml" --cache "$work/cache" --key "$work/demo/keys/dev/cosign.key" --registry "$from" >/dev/null
version=$(awk '/^version:/ {print $2}' "$work/demo/spec.yaml")
pub=$work/demo/keys/dev/cosign.pub key=$work/demo/keys/dev/cosign.key

# serve PORT: a factory replica on the internal registry.
serve() {
  "$B" factory serve --release "docker://$from" --key "$pub" --signing-key "$key" --listen "127.0.0.1:$1" --build-rate 0 2>>"$work/factory.log" &
  pids+=($!)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return; sleep 0.1; done
  echo "factory on $1 did not start" >&2; exit 1
}
serve 18100
url=http://127.0.0.1:18100
for i in $(seq "$n_sch"); do
  id=$(printf 'customization:\n  extraKernelArgs: [bench.i=%s]\n' "$i" | curl -sf --data-binary @- "$url/schematics" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  for a in kernel-amd64 initramfs-amd64.xz cmdline-metal-amd64 metal-amd64.iso; do curl -sf -o /dev/null "$url/image/$id/$version/$a"; done
  curl -sf -o /dev/null -H 'Accept: application/vnd.oci.image.index.v1+json' "$url/v2/installer/$id/manifests/$version"
done
iso=$url/image/$id/$version/metal-amd64.iso

t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
tt=$(t "$B" factory transfer --version "$version" --cached --key "$pub" --report "$work/transfer.json" "docker://$from" docker://127.0.0.1:15102/nodeforge/p11)
# The same tagged objects with crane cp, one process each.
python3 - "$work/transfer.json" >"$work/tags" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for part, prefix in (("release", ""), ("cache", "factory-cache/")):
    for p in (r.get(part) or {}).get("items", []):
        if p.get("tag"):
            print(prefix + p["repository"] + ":" + p["tag"])
EOF
crane_cp() { while read -r ref; do crane cp --insecure "$from/$ref" "127.0.0.1:15103/nodeforge/p11/$ref"; done <"$work/tags"; }
tc=$(t crane_cp)
objects=$(wc -l <"$work/tags")

size=$(curl -sf "$iso" | wc -c)
fetch_all() { # PORTS...: 16 clients, $repeat downloads each over the replicas; prints MiB/s
  local ports=("$@") s e
  s=$(date +%s.%N)
  for c in $(seq 16); do
    (for r in $(seq "$repeat"); do p=${ports[$(((c + r) % ${#ports[@]}))]}; curl -sf -o /dev/null "http://127.0.0.1:$p/image/$id/$version/metal-amd64.iso"; done) &
  done
  wait; e=$(date +%s.%N)
  echo "16 * $repeat * $size / 1048576 / ($e - $s)" | bc -l | cut -c1-6
}
r1=$(fetch_all 18100)
serve 18101
r2=$(fetch_all 18100 18101)
serve 18102; serve 18103
r4=$(fetch_all 18100 18101 18102 18103)

cat <<EOF | tee "$work/summary"
factory instances, demo release $version, $(nproc) cores
transfer of the release and $n_sch cached schematics ($objects tagged objects): builder factory transfer $tt s, crane cp of the same $tc s: $(echo "$tt / $tc" | bc -l | cut -c1-4)x (target <= 1.0)
cached ISO ($((size / 1024)) KiB) from a cache registry, 16 clients x $repeat: 1 replica $r1 MiB/s, 2 replicas $r2 MiB/s, 4 replicas $r4 MiB/s
EOF
