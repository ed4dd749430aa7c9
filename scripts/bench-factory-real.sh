#!/usr/bin/env bash
# Benchmark (issue 41): the Image Factory on a release of the real base.
# Not part of CI; takes minutes (the release, then raw.xz alone takes long).
#
#   scripts/bench-factory-real.sh [WORKDIR]       (default /tmp/nodeforge-bench-factory-real)
#   BENCH_BASE=real scripts/bench-factory.sh [WORKDIR]   (the same)
#
# The release: the ~60 real Debian packages converted to signed RPMs by
# scripts/mkrealbase.sh (into REALBASE_DIR, default WORKDIR/real-repo; its
# .debs cached in REALBASE_CACHE; idempotent, so a base made before is
# reused), with the init and the EFI boot manager of the test base
# (pkgbase/testbase/mkbase); components kernel, rootfs, installer, and the
# cri (containerd, runc) and btrfs (btrfs-progs) extensions of the real
# packages, which leave the root for them. builder release publishes it
# into an OCI layout and into a docker-registry on loopback.
#
# Measured from builder factory serve on the layout, each request for a
# schematic never seen before (unique extraKernelArgs):
#   first metal-amd64.iso, metal-amd64.raw.xz, metal-amd64.qcow2,
#   initramfs-amd64.xz and an installer pull (crane pull of
#   installer/ID:VERSION from the factory's registry front), each beside
#   its floor: reading the release's blobs once + writing the artifact's
#   bytes once + the compression the format needs on all cores (ISO:
#   xorriso writing the same tree, its payload once; raw.xz: xz -T0 -6
#   of the same raw disk; qcow2 and initramfs: none; installer: gzip -6
#   of its layers the release does not hold, pigz when installed). A
#   second floor adds the schematic's initramfs segment (reading the
#   extensions' layers, gunzip and tar, then mksquashfs of their trees
#   at the release's squashfs settings on all cores, then zstd -1),
#   which every medium of a new set of extensions needs once; the first
#   ISO's time is the median of ISO_SAMPLES (default 3) first ISOs, the
#   first factory's and those of fresh ones (no squashfs kept), and its
#   floors the medians of as many runs;
#   the second schematic differing by one extension (cri+btrfs, then cri
#   alone): its first ISO against the first's (target <= 0.5);
#   the factory's peak RSS (VmHWM) per phase (reset through clear_refs;
#   beside it the resident size at the reset, what the Go heap kept from
#   the phases before) and over the run;
#   CONCURRENT (default 10) new schematics' ISOs requested at once: all
#   must be 200; p50, p99 and wall;
#   the factory on the registry release: a new schematic's first ISO and
#   installer pull.
# WORKDIR/summary holds the table.
#
# Environment: REALBASE_DIR, REALBASE_CACHE (mkrealbase.sh's, default
# /var/cache/nodeforge/realbase-cache when it exists), LEVEL (zstd level of
# the release, default 13), PORT (factory, default 18090), RPORT (registry,
# default 15190; ISO_SAMPLES more factories on the ports after PORT + 20),
# CONCURRENT (default 10), ISO_SAMPLES (default 3), CGO_CFLAGS.
set -euo pipefail

usage() {
  local out=1
  [ "${1:-0}" = 0 ] || out=2
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&"$out"
  exit "${1:-0}"
}
case ${1:-} in -h | --help) usage 0 ;; -*) echo "bench-factory-real: unknown option $1" >&2; usage 2 ;; esac
[ $# -le 1 ] || usage 2
cd "$(dirname "$0")/.."

for tool in go curl python3 xorriso xz zstd crane docker-registry mksquashfs createrepo_c pgrep tar bc awk find; do
  command -v "$tool" >/dev/null || { echo "bench-factory-real: missing tool: $tool" >&2; exit 1; }
done
gz=gzip
command -v pigz >/dev/null && gz=pigz

work=$(mkdir -p "${1:-/tmp/nodeforge-bench-factory-real}" && cd "${1:-/tmp/nodeforge-bench-factory-real}" && pwd)
realbase=${REALBASE_DIR:-$work/real-repo}
if [ -z "${REALBASE_CACHE:-}" ] && [ -d /var/cache/nodeforge/realbase-cache ]; then
  export REALBASE_CACHE=/var/cache/nodeforge/realbase-cache
fi
level=${LEVEL:-13} port=${PORT:-18090} rport=${RPORT:-15190} concurrent=${CONCURRENT:-10} samples=${ISO_SAMPLES:-3}
version=1.11.0-real
B=$work/builder
export COSIGN_PASSWORD=bench
log() { echo "== $*" >&2; }

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# now: seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }
# t CMD...: runs CMD (its output discarded), prints its wall seconds.
t() {
  local s e
  s=$(now)
  "$@" >/dev/null || { echo "bench-factory-real: failed: $*" >&2; exit 1; }
  e=$(now)
  echo "$e - $s" | bc
}
# put KEY VALUE: one figure for the summary.
put() { echo "$1=$2" >>"$work/figures"; }
# measure_median KEY N CMD...: put KEY, the median wall seconds of N
# runs of CMD (each after a sync), and KEY_all, every run's.
measure_median() {
  local k=$1 n=$2 vs=() i
  shift 2
  for i in $(seq "$n"); do
    sync
    vs+=("$(t "$@")")
  done
  put "${k}_all" "${vs[*]}"
  put "$k" "$(printf '%s\n' "${vs[@]}" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')"
}
# measure KEY CMD...: put KEY, the wall seconds of CMD (a failure ends the run).
measure() {
  local k=$1 v
  shift
  v=$(t "$@")
  put "$k" "$v"
}

log "builder (cgo on: liblzma's xz)"
CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}" go build -o "$B" ./cmd/builder

# Another mkrealbase.sh writing the same base (a session making it): wait.
while pgrep -f "mkrealbase.sh $realbase" >/dev/null; do
  log "waiting for the running scripts/mkrealbase.sh $realbase"
  sleep 15
done
log "the real base: scripts/mkrealbase.sh $realbase (log $work/mkrealbase.log)"
bash scripts/mkrealbase.sh "$realbase" >"$work/mkrealbase.log" 2>&1 || {
  tail "$work/mkrealbase.log" >&2
  echo "bench-factory-real: mkrealbase.sh failed" >&2
  exit 1
}
[ -d "$realbase/repo/repodata" ] || { echo "bench-factory-real: $realbase/repo has no repodata" >&2; exit 1; }
realbase=$(cd "$realbase" && pwd)

log "the test base (init, boot manager)"
testspec=$(go run ./pkgbase/testbase/mkbase -dir "$work/test")
testdir=$(dirname "$testspec")

# One repository holding both (a release verifies that every package came
# from its base, one repository): the real packages and the test base's
# init and boot manager, each signed by its own key.
log "the base's repository: the real packages, the test base's init and boot manager"
base=$work/base
rm -rf "$base" && mkdir -p "$base/repo"
for f in "$realbase"/repo/*.rpm "$testdir"/repo/RPMS/nodeforge-testinit-*.rpm "$testdir"/repo/RPMS/systemd-boot-efi-*.rpm; do
  ln "$f" "$base/repo/" 2>/dev/null || cp "$f" "$base/repo/"
done
createrepo_c -q "$base/repo"

# The spec: the real base's packages, the kernel apart; containerd, runc
# and btrfs-progs leave the root for the cri and btrfs extensions (an
# extension lays only what the root lacks). The definitions are the boot
# tests' (pkgbase/debext), cri without the CNI plugins the base lacks.
log "the spec"
spec_dir=$work/spec
rm -rf "$spec_dir" && mkdir -p "$spec_dir/extensions"
ext_pkgs='^(containerd|runc|btrfs-progs)$'
for p in containerd runc btrfs-progs; do
  grep -qx "$p" "$realbase/packages.txt" || { echo "bench-factory-real: $p not in $realbase/packages.txt" >&2; exit 1; }
done
kernel_pkg=$(grep '^linux-image-' "$realbase/packages.txt")
root_pkgs=$(grep -v '^linux-image-' "$realbase/packages.txt" | grep -Ev "$ext_pkgs" | paste -sd, | sed 's/,/, /g')
cat >"$spec_dir/spec.yaml" <<SPEC
# The real base (scripts/mkrealbase.sh) with the test base's init and boot
# manager: written by scripts/bench-factory-real.sh.
name: realbase
branch: realbase
version: $version
architectures: [x86_64]
repositories:
  - name: realbase
    url: $base/repo
    format: rpm-md
    keyring: [$realbase/RPM-GPG-KEY-test, $testdir/keys/boottest.asc]
    verify: packages
components:
  kernel:
    kind: kernel
    packages: [$kernel_pkg]
  rootfs:
    kind: rootfs
    packages: [$root_pkgs]
  installer:
    kind: installer
    packages: [nodeforge-testinit, systemd-boot-efi]
  cri:
    kind: extension
  btrfs:
    kind: extension
extensions-dir: extensions
image:
  os: {id: nodeforge, name: Nodeforge, pretty-name: "Nodeforge factory benchmark (real packages)"}
  compression-level: $level
  initramfs-compression: zstd
  setuid: [/bin/mount, /bin/su, /bin/umount, /var/local]
  init: {package: nodeforge-testinit, path: /usr/libexec/nodeforge/init}
  installer: {package: nodeforge-testinit, path: /usr/libexec/nodeforge/init}
  bootloader: {package: systemd-boot-efi, path: /usr/lib/systemd/boot/efi/systemd-bootx64.efi}
  boot-modules: [loop, squashfs, overlay]
SPEC
cat >"$spec_dir/extensions/cri.yaml" <<'DEF'
# Debian's containerd and runc of the real base as the cri extension.
name: cri
description: containerd and runc (Debian's packages)
author: Nodeforge
compatibility: ">= v1.8.0"
packages: [containerd, runc]
version-from: containerd
relocate:
  - {from: /usr/bin/, to: /usr/local/bin/}
  - {from: /usr/sbin/, to: /usr/local/sbin/}
drop:
  - /lib/systemd/**
  - /usr/share/**
  - /etc/containerd/config.toml
  - /usr/bin/containerd-shim
  - /usr/bin/containerd-shim-runc-v1
DEF
cat >"$spec_dir/extensions/btrfs.yaml" <<'DEF'
# Debian's btrfs-progs of the real base as the btrfs extension.
name: btrfs
description: Btrfs tools (Debian's btrfs-progs)
author: Nodeforge
compatibility: ">= v1.8.0"
packages: [btrfs-progs]
relocate:
  - {from: /bin/, to: /usr/local/bin/}
  - {from: /sbin/, to: /usr/local/sbin/}
  - {from: /lib/udev/rules.d/, to: /usr/lib/udev/rules.d/}
links:
  - {path: /usr/local/sbin/btrfs, target: ../bin/btrfs}
  - {path: /usr/local/bin/mkfs.btrfs, target: ../sbin/mkfs.btrfs}
drop:
  - /usr/share/**
  # A shell script naming /bin, which the relocation moves (refused).
  - /sbin/fsck.btrfs
DEF

# registry NAME PORT: a docker-registry on loopback with its own storage.
registry() {
  rm -rf "${work:?}/$1" && mkdir -p "$work/$1"
  cat >"$work/$1.yml" <<EOF
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/$1}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$2}
EOF
  docker-registry serve "$work/$1.yml" >"$work/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$2/v2/" >/dev/null && return; sleep 0.1; done
  echo "bench-factory-real: docker-registry $1 did not start on 127.0.0.1:$2 (log $work/$1.log)" >&2
  exit 1
}

log "keys, release into a layout (cold: step caches empty) and into a registry"
: >"$work/figures"
keys=$work/keys
rm -rf "$keys" "$work/layout" "$work/cache/laid" "$work/cache/squashfs-packs" "$work/cache/builds" "$spec_dir/out"
"$B" keys generate --out "$keys" >/dev/null
layout=$work/layout
measure release_layout "$B" release -q --branch realbase --spec "$spec_dir/spec.yaml" --cache "$work/cache" --key "$keys/cosign.key" --layout "$layout"
registry reg "$rport"
regref=127.0.0.1:$rport/nodeforge/real
measure release_registry "$B" release -q --branch realbase --spec "$spec_dir/spec.yaml" --cache "$work/cache" --key "$keys/cosign.key" --registry "$regref"
put release_blobs "$(du -sb "$layout/blobs" | cut -f1)"

# serve PORT STORE CACHE: a factory; its pid in fpid.
serve() {
  "$B" factory serve --release "$2" --key "$keys/cosign.pub" --signing-key "$keys/cosign.key" --cache "$3" \
    --listen "127.0.0.1:$1" --build-rate 0 --schematic-rate 0 --max-queue $((4 * concurrent)) 2>>"$work/factory.log" &
  fpid=$!
  pids+=("$fpid")
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return
    kill -0 "$fpid" 2>/dev/null || break
    sleep 0.2
  done
  tail "$work/factory.log" >&2
  echo "bench-factory-real: the factory on $2 did not become ready" >&2
  exit 1
}
rm -rf "$work/factory-cache" "$work/factory.log"
serve "$port" "oci:$layout" "oci:$work/factory-cache"
url=http://127.0.0.1:$port

# rss_reset and rss_read NAME: the factory's peak RSS of a phase (VmHWM,
# reset between phases), and the run's peak as the largest.
# rss_reset also keeps the resident size at the reset (what the Go heap
# kept from the phases before), which rss_read NAME puts as base_NAME.
rss_reset() {
  echo 5 2>/dev/null >"/proc/$fpid/clear_refs" || log "cannot reset the factory's VmHWM (clear_refs): the phase's peak includes the earlier ones"
  rss_base=$(awk '/^VmRSS/ {print $2}' "/proc/$fpid/status")
}
rss_read() {
  local kb
  kb=$(awk '/^VmHWM/ {print $2}' "/proc/$fpid/status")
  put "rss_$1" "$kb"
  put "base_$1" "${rss_base:-0}"
}
rss_read startup

# schematic EXTENSIONS...: a new schematic's ID (a unique kernel argument).
schematic() {
  local exts
  exts=$(printf '%s, ' "$@" | sed 's/, $//')
  printf 'customization:\n  extraKernelArgs: [bench.real=%s.%s]\n  systemExtensions:\n    officialExtensions: [%s]\n' \
    "$(date +%s%N)" "$RANDOM" "$exts" |
    curl -sf --data-binary @- "$url/schematics" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
# get NAME URL OUT: downloads a first artifact, one phase: its time.
get() {
  local code
  rss_reset
  local s e
  s=$(now)
  code=$(curl -s -o "$3" -w '%{http_code}' "$2")
  e=$(now)
  [ "$code" = 200 ] || { echo "bench-factory-real: $2: HTTP $code: $(head -c 300 "$3")" >&2; exit 1; }
  rss_read "$1"
  put "time_$1" "$(echo "$e - $s" | bc)"
  put "size_$1" "$(stat -c %s "$3")"
}
art=$work/artifacts
rm -rf "$art" && mkdir -p "$art"

log "first ISO, cri+btrfs; then a second schematic, cri alone"
id=$(schematic cri btrfs)
sync
get iso "$url/image/$id/$version/metal-amd64.iso" "$art/first.iso"
id=$(schematic cri)
get iso2 "$url/image/$id/$version/metal-amd64.iso" "$art/second.iso"
# A first ISO again on fresh factories (each its own scratch space, so
# no squashfs kept): the VM's times move by a second from one run to the
# next, so the ISO's figure is the median of ISO_SAMPLES first ISOs, as
# its floors are of as many runs. Each starts with nothing to write back
# (sync), and while the first factory is idle.
log "a first ISO on $((samples - 1)) more fresh factories"
main_fpid=$fpid main_url=$url
put time_iso_1 "$(awk -F= '$1 == "time_iso" {print $2}' "$work/figures")"
for k in $(seq 2 "$samples"); do
  rm -rf "$work/factory-cache-$k"
  serve $((port + 20 + k)) "oci:$layout" "oci:$work/factory-cache-$k"
  url=http://127.0.0.1:$((port + 20 + k))
  id=$(schematic cri btrfs)
  sync
  s=$(now)
  code=$(curl -s -o "$art/first-$k.iso" -w '%{http_code}' "$url/image/$id/$version/metal-amd64.iso")
  e=$(now)
  [ "$code" = 200 ] || { echo "bench-factory-real: a first ISO on a fresh factory: HTTP $code" >&2; exit 1; }
  put "time_iso_$k" "$(echo "$e - $s" | bc)"
  kill "$fpid" 2>/dev/null || true
  wait "$fpid" 2>/dev/null || true
  rm -rf "$work/factory-cache-$k" "$art/first-$k.iso"
done
fpid=$main_fpid url=$main_url

log "first raw.xz"
id=$(schematic cri btrfs)
get rawxz "$url/image/$id/$version/metal-amd64.raw.xz" "$art/disk.raw.xz"
log "first qcow2"
id=$(schematic cri btrfs)
get qcow2 "$url/image/$id/$version/metal-amd64.qcow2" "$art/disk.qcow2"
log "first initramfs, and the same schematic's kernel"
id=$(schematic cri btrfs)
get initramfs "$url/image/$id/$version/initramfs-amd64.xz" "$art/initramfs.xz"
get kernel "$url/image/$id/$version/kernel-amd64" "$art/kernel"
log "installer pull"
id=$(schematic cri btrfs)
rss_reset
measure time_installer crane pull --insecure --format oci "127.0.0.1:$port/installer/$id:$version" "$art/installer"
rss_read installer
put size_installer "$(du -sb "$art/installer" | cut -f1)"

log "$concurrent new schematics' ISOs at once"
ids=()
for _ in $(seq "$concurrent"); do ids+=("$(schematic cri btrfs)"); done
rss_reset
s=$(now)
cpids=()
for i in "${!ids[@]}"; do
  curl -s -o "$art/conc-$i.iso" -w '%{http_code} %{time_total}\n' "$url/image/${ids[$i]}/$version/metal-amd64.iso" >"$art/conc-$i.out" &
  cpids+=($!)
done
wait_ok=1
for j in "${cpids[@]}"; do wait "$j" || wait_ok=0; done
e=$(now)
rss_read concurrent
put time_concurrent_wall "$(echo "$e - $s" | bc)"
cat "$art"/conc-*.out >"$work/concurrent"
[ "$wait_ok" = 1 ] || { echo "bench-factory-real: a concurrent request failed: $(cat "$work/concurrent")" >&2; exit 1; }

log "floors: reading the release's blobs, writing each artifact, compression"
measure floor_read find "$layout/blobs" -type f -exec cat {} +
# ISO: xorriso writing the same tree, less the El Torito image (the ESP,
# efiboot.img), whose files the tree's point into: the payload once.
fl=$work/floor && rm -rf "$fl" && mkdir -p "$fl"
xorriso -osirrox on -indev "$art/first.iso" -extract / "$fl/iso-tree" >/dev/null 2>&1
chmod -R u+w "$fl/iso-tree"
rm -f "$fl/iso-tree/boot.catalog"
if [ -f "$fl/iso-tree/efiboot.img" ]; then
  rest=$(find "$fl/iso-tree" -type f ! -name efiboot.img -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  [ "$rest" -lt $(($(stat -c %s "$fl/iso-tree/efiboot.img") / 2)) ] || rm -f "$fl/iso-tree/efiboot.img"
fi
measure_median floor_write_iso "$samples" xorriso -as mkisofs -quiet -R -o "$fl/floor.iso" "$fl/iso-tree"
put size_floor_iso "$(stat -c %s "$fl/floor.iso")"
rm -rf "$fl/iso-tree" "$fl/floor.iso"
# raw.xz: xz -T0 -6 of the same raw disk (the output written once).
xz -dc -T0 "$art/disk.raw.xz" >"$fl/disk.raw"
put size_raw "$(stat -c %s "$fl/disk.raw")"
# shellcheck disable=SC2016 # the sh -c script takes its arguments
measure floor_compress_rawxz sh -c 'xz -T0 -6 -c "$1" >"$2"' _ "$fl/disk.raw" "$fl/floor.raw.xz"
put size_floor_rawxz "$(stat -c %s "$fl/floor.raw.xz")"
rm -f "$fl/disk.raw" "$fl/floor.raw.xz"
for a in qcow2:disk.qcow2 initramfs:initramfs.xz; do
  measure "floor_write_${a%%:*}" cp "$art/${a#*:}" "$fl/copy"
  rm -f "$fl/copy"
done
# installer: the layers the release does not hold, gzipped again.
python3 - "$art/installer" "$layout" >"$fl/new-layers" <<'PY'
import json, os, sys
pulled, release = sys.argv[1:]
def blob(root, d):
    return os.path.join(root, "blobs", *d.split(":"))
todo = [json.load(open(os.path.join(pulled, "index.json")))]
while todo:
    m = todo.pop()
    for d in m.get("manifests", []):
        todo.append(json.load(open(blob(pulled, d["digest"]))))
    for l in m.get("layers", []):
        if not os.path.exists(blob(release, l["digest"])):
            print(l["mediaType"], blob(pulled, l["digest"]))
PY
: >"$fl/layers.tar"
while read -r mt path; do
  case $mt in
  *zstd*) zstd -dc "$path" >>"$fl/layers.tar" ;;
  *gzip*) gzip -dc "$path" >>"$fl/layers.tar" ;;
  *) cat "$path" >>"$fl/layers.tar" ;;
  esac
done <"$fl/new-layers"
put size_installer_new_tar "$(stat -c %s "$fl/layers.tar")"
# shellcheck disable=SC2016 # the sh -c script takes its arguments
measure floor_compress_installer sh -c '"$1" -6 -c "$2" >"$3"' _ "$gz" "$fl/layers.tar" "$fl/layers.tar.gz"
# shellcheck disable=SC2016 # the sh -c script takes its arguments
measure floor_write_installer sh -c 'find "$1" -type f -exec cat {} + >"$2"' _ "$art/installer/blobs" "$fl/copy"
rm -f "$fl/copy"
rm -f "$fl/layers.tar" "$fl/layers.tar.gz"
# The segment: the extensions' layers read (from the factory's
# extensions/NAME, gunzip and tar as the factory must), their trees as
# squashfs at the release's settings on all cores, then zstd -1.
read -r sq_comp sq_level sq_block < <(python3 - "$layout" <<'PY'
import json, os, sys
root = os.path.join(sys.argv[1], "blobs", "sha256")
for f in os.listdir(root):
    p = os.path.join(root, f)
    if os.path.getsize(p) > 1 << 20:
        continue
    try:
        doc = json.load(open(p))
    except Exception:
        continue
    if not isinstance(doc, dict):
        continue
    for m in [doc] + [x for x in doc.get("manifests", []) if isinstance(x, dict)]:
        a = (m.get("annotations") or {}).get("dev.nodeforge.media")
        if a:
            s = json.loads(a)["squashfs"]
            print(s["compressor"], s["level"], s["blockSize"] or 131072)
            sys.exit(0)
print("zstd", 13, 131072)
PY
)
put squashfs "$sq_comp-$sq_level/$sq_block"
comp_opt=(-comp "$sq_comp")
[ "$sq_comp" = zstd ] && comp_opt+=(-Xcompression-level "$sq_level")
segment() {
  local e
  for e in cri btrfs; do
    rm -rf "$fl/ext-$e"
    mkdir -p "$fl/ext-$e"
    crane export --insecure "127.0.0.1:$port/extensions/$e:$version" - | tar -x -C "$fl/ext-$e"
  done
  for e in cri btrfs; do
    mksquashfs "$fl/ext-$e/rootfs" "$fl/$e.sqsh" -noappend -quiet -no-progress -all-root -b "$sq_block" "${comp_opt[@]}" >/dev/null
  done
  cat "$fl/cri.sqsh" "$fl/btrfs.sqsh" | zstd -1 -T0 -q -c >"$fl/segment.zst"
}
measure_median floor_segment "$samples" segment
put size_segment "$(stat -c %s "$fl/segment.zst")"
rm -rf "$fl"/ext-* "$fl"/*.sqsh "$fl/segment.zst"

kill "$fpid" 2>/dev/null || true
wait "$fpid" 2>/dev/null || true

log "the factory on the registry release: a first ISO and an installer pull"
serve "$port" "docker://$regref" "docker://$regref/factory-cache"
rss_read reg_startup
id=$(schematic cri btrfs)
get reg_iso "$url/image/$id/$version/metal-amd64.iso" "$art/reg.iso"
id=$(schematic cri btrfs)
rss_reset
measure time_reg_installer crane pull --insecure --format oci "127.0.0.1:$port/installer/$id:$version" "$art/reg-installer"
rss_read reg_installer
kill "$fpid" 2>/dev/null || true
wait "$fpid" 2>/dev/null || true

python3 - "$work/figures" "$work/concurrent" "$(nproc)" "$version" "$gz" <<'PY' | tee "$work/summary"
import statistics, sys
figs = {}
for line in open(sys.argv[1]):
    k, v = line.rstrip("\n").split("=", 1)
    figs[k] = v
f = lambda k: float(figs[k])
conc = [l.split() for l in open(sys.argv[2]) if l.strip()]
cores, version, gz = sys.argv[3], sys.argv[4], sys.argv[5]
mib = lambda b: b / 1048576
rd, seg = f("floor_read"), f("floor_segment")
iso_times = sorted(float(figs[k]) for k in figs if k.startswith("time_iso_"))
iso_first = f("time_iso")  # the main factory's, beside its second schematic
figs["time_iso"] = str(statistics.median(iso_times))
print(f"factory at real size, release {version} ({mib(f('release_blobs')):.0f} MiB of blobs), {cores} cores")
print(f"release: into a layout {f('release_layout'):.1f} s (cold step caches), into a registry {f('release_registry'):.1f} s")
print(f"floor parts: reading the release's blobs {rd:.2f} s; the initramfs segment (cri+btrfs layers read, squashfs {figs['squashfs']}, all cores, + zstd -1) {seg:.2f} s")
print()
print(f"{'first request (new schematic)':32} {'size MiB':>9} {'time s':>8} {'floor s':>8} {'ratio':>6} {'+segment':>9} {'ratio':>6}  floor is")
rows = [
    ("metal-amd64.iso", "iso", f("floor_write_iso"), "read + xorriso writing the same tree, payload once"),
    ("metal-amd64.raw.xz", "rawxz", f("floor_compress_rawxz"), f"read + xz -T0 -6 of the {mib(f('size_raw')):.0f} MiB raw disk ({mib(f('size_floor_rawxz')):.0f} MiB)"),
    ("metal-amd64.qcow2", "qcow2", f("floor_write_qcow2"), "read + write"),
    ("initramfs-amd64.xz", "initramfs", f("floor_write_initramfs"), "read + write"),
    ("installer pull (crane)", "installer", f("floor_write_installer") + f("floor_compress_installer"),
     f"read + write + {gz} -6 of the {mib(f('size_installer_new_tar')):.0f} MiB of new layers"),
]
for name, k, extra, what in rows:
    fl = rd + extra
    t = f("time_" + k)
    print(f"{name:32} {mib(f('size_' + k)):9.1f} {t:8.2f} {fl:8.2f} {t / fl:5.2f}x {fl + seg:9.2f} {t / (fl + seg):5.2f}x  {what}")
print()
print(f"first ISO on {len(iso_times)} fresh factories: {', '.join(f'{t:.2f}' for t in iso_times)} s (the median above); "
      f"floors, each the median of as many runs: xorriso {figs['floor_write_iso_all']} s, segment {figs['floor_segment_all']} s")
t1, t2 = iso_first, f("time_iso2")
print(f"second schematic, one extension fewer (cri alone): first ISO {t2:.2f} s against {t1:.2f} s: {t2 / t1:.2f}x (target <= 0.5)")
payload = f("size_kernel") + f("size_initramfs")
print(f"ISO size {mib(f('size_iso')):.1f} MiB against one copy of kernel + initramfs {mib(payload):.1f} MiB: {f('size_iso') / payload:.2f}x (target <= 1.05); xorriso's ISO of the same tree {mib(f('size_floor_iso')):.1f} MiB")
codes = [c[0] for c in conc]
lat = sorted(float(c[1]) for c in conc)
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
ok = codes.count("200")
print(f"{len(conc)} new schematics' ISOs at once: {ok}/{len(conc)} served 200; p50 {statistics.median(lat):.1f} s, p99 {p(0.99):.1f} s, wall {f('time_concurrent_wall'):.1f} s")
print()
phases = ["startup", "iso", "iso2", "rawxz", "qcow2", "initramfs", "kernel", "installer", "concurrent"]
print("factory peak RSS by phase, MiB (VmHWM after a reset; in brackets the RSS at the reset, kept from before):")
print("  " + ", ".join(f"{p} {f('rss_' + p) / 1024:.0f} ({f('base_' + p) / 1024:.0f})" for p in phases))
print(f"factory peak RSS over the run: {max(f('rss_' + p) for p in phases) / 1024:.0f} MiB (target < 300 MiB)")
print(f"factory on the registry release: first ISO {f('time_reg_iso'):.2f} s, installer pull {f('time_reg_installer'):.2f} s; peak RSS {max(f('rss_' + p) for p in ('reg_startup', 'reg_iso', 'reg_installer')) / 1024:.0f} MiB")
if ok != len(conc):
    sys.exit("not every concurrent request was served")
PY
