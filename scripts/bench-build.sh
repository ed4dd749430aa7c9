#!/usr/bin/env bash
# Benchmark: `builder build` against `rpm -i --root` + `mksquashfs` on the
# same packages, side by side, alternating rounds. Not part of CI.
#
#   scripts/bench-build.sh [WORKDIR]
#
# Bases (BENCH_BASES, default "real real-lzma test"):
#   real       about 60 real Debian packages (the distribution kernel with
#              every module, libc, coreutils, util-linux, iproute2,
#              containerd, runc, filesystem tools, iptables...) converted to
#              signed RPMs with xz payloads by scripts/mkrealbase.sh (cached
#              in WORKDIR/realbase and REALBASE_CACHE; the first run downloads
#              the .debs from Debian's archive and takes minutes);
#   real-lzma  the same packages with lzma payloads, as ALT's older ones;
#   test       the 3-package Debian-derived boot test base with every kernel
#              module (pkgbase/testbase), cheap payloads.
# The real bases take the init and the boot manager from the test base.
#
# Per base: wall time, CPU time and peak RSS of a cold build (downloads
# cached, step caches empty) and of the standard pair at the same zstd
# level (medians of ROUNDS, default 3), image sizes, the CPU floor (payload
# decompression by rpm2cpio, i.e. liblzma/zlib, plus mksquashfs's
# compression on one processor, divided by the cores; measured in every
# round, as the host's speed moves, the ratio of the medians), a rebuild with
# nothing changed (into the same output) and a rebuild after one package
# changed (the init package rebuilt with other bytes).
#
# LEVEL (default 13, the builder's default) is the zstd level of both
# sides: a cheap level shows what the build costs beside compression.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mkdir -p "${1:-/tmp/nodeforge-bench}" && cd "${1:-/tmp/nodeforge-bench}" && pwd)
B=$work/builder
CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}" go build -o "$B" ./cmd/builder
cores=$(nproc)
level=${LEVEL:-13}

# t CMD...: runs CMD, prints "wall-seconds peak-RSS-KiB cpu-seconds".
t() { /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$@" >/dev/null 2>"$work/stderr" || { cat "$work/stderr"; exit 1; }; awk '{print $1, $2, $3 + $4}' "$work/time"; }

echo "== the test base (init, boot manager; every kernel module)"
testspec=$(go run ./pkgbase/testbase/mkbase -dir "$work/test" -all-modules)
testrepo=$(dirname "$testspec")/repo

# realspec NAME REPO TESTREPO: a spec of the real base in REPO, with the
# init and boot manager of TESTREPO.
realspec() {
  local dir=$work/$1 repo=$2 testrepo=$3 pkgs
  pkgs=$(grep -v '^linux-image-' "$repo/../packages.txt" | paste -sd, | sed 's/,/, /g')
  mkdir -p "$dir"
  cat >"$dir/spec.yaml" <<SPEC
name: realbase
branch: realbase
version: 0.1.0
architectures: [x86_64]
repositories:
  - name: realbase
    url: $repo
    format: rpm-md
    keyring: [$repo/../RPM-GPG-KEY-test]
    verify: packages
  - name: testbase
    url: $testrepo
    format: rpm-md
    insecure-skip-verify: true
components:
  kernel:
    kind: kernel
    packages: [$(grep '^linux-image-' "$repo/../packages.txt")]
  rootfs:
    kind: rootfs
    packages: [$pkgs]
  installer:
    kind: installer
    packages: [nodeforge-testinit, systemd-boot-efi]
image:
  os: {id: nodeforge, name: Nodeforge, pretty-name: "Nodeforge benchmark (real packages)"}
  compression-level: $level
  initramfs-compression: zstd
  setuid: [/bin/mount, /bin/su, /bin/umount, /var/local]
  init: {package: nodeforge-testinit, path: /usr/libexec/nodeforge/init}
  installer: {package: nodeforge-testinit, path: /usr/libexec/nodeforge/init}
  bootloader: {package: systemd-boot-efi, path: /usr/lib/systemd/boot/efi/systemd-bootx64.efi}
  boot-modules: [loop, squashfs, overlay]
SPEC
  echo "$dir/spec.yaml"
}

# The init package rebuilt with other bytes, in a copy of the test base's
# repository: "one package changed".
echo "== a copy of the test base with the init package changed"
rm -rf "$work/changed" && mkdir -p "$work/changed/pkg/root" && cp -r "$testrepo" "$work/changed/repo"
init_rpm=$(ls "$work/changed/repo"/RPMS/nodeforge-testinit-*.rpm)
(cd "$work/changed/pkg/root" && rpm2cpio "$init_rpm" | cpio -idm --quiet --no-absolute-filenames)
printf 'bench: changed package\n' >>"$work/changed/pkg/root/usr/libexec/nodeforge/init"
cat >"$work/changed/pkg/init.spec" <<SPEC
Name: nodeforge-testinit
Version: $(rpm -qp --qf '%{VERSION}' "$init_rpm")
Release: $(rpm -qp --qf '%{RELEASE}' "$init_rpm")
Summary: test init, changed for the benchmark
License: MIT
%description
Changed copy.
%install
cp -a $work/changed/pkg/root/. %{buildroot}/
%files
%dir /usr/libexec/nodeforge
/usr/libexec/nodeforge/init
SPEC
rm -f "$init_rpm"
rpmbuild -bb --quiet --define "_topdir $work/changed/pkg/top" --define "_rpmdir $work/changed/repo/RPMS" \
  --define '_build_id_links none' --define '__strip /bin/true' --define '_rpmfilename %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm' \
  "$work/changed/pkg/init.spec" >/dev/null 2>&1
createrepo_c -q "$work/changed/repo"

# bench NAME SPEC CHANGED_SPEC RPM...: one base, every figure; a line in
# $work/summary.
bench() {
  local name=$1 spec=$2 changed=$3; shift 3
  local rpms=("$@") w=$work/run-$name
  rm -rf "$w" && mkdir -p "$w"
  local payload=0
  for r in "${rpms[@]}"; do payload=$((payload + $(rpm -qp --nosignature --nodigest --qf '%{LONGSIZE}' "$r"))); done
  echo "== $name: ${#rpms[@]} packages, $((payload / 1048576)) MiB installed, payloads: $(rpm -qp --nosignature --nodigest --qf '%{PAYLOADCOMPRESSOR}\n' "${rpms[@]}" | sort | uniq -c | tr '\n' ' ')"
  "$B" lock -q --spec "$spec" --cache "$work/cache" -o "$w/lock.json"
  "$B" build -q --spec "$spec" --lock "$w/lock.json" --cache "$work/cache" --out "$w/warm" >/dev/null
  : >"$w/b.times"; : >"$w/s.times"; : >"$w/f.times"
  for round in $(seq "${ROUNDS:-3}"); do
    echo "   round $round: builder build (downloads cached, step caches and build stamps empty)"
    rm -rf "$work/cache/laid" "$work/cache/squashfs-packs" "$work/cache/builds"
    t "$B" build -q --spec "$spec" --lock "$w/lock.json" --cache "$work/cache" --out "$w/out" >>"$w/b.times"
    echo "   round $round: rpm -i --root + mksquashfs -comp zstd -Xcompression-level $level"
    rm -rf "$w/root" && mkdir -p "$w/root"
    read -r r_secs _ r_cpu < <(t rpm -i --root "$w/root" --dbpath /var/lib/rpm --nodeps --noscripts --nosignature --nodigest "${rpms[@]}")
    # What the node OS image holds: no /boot (the kernel ships as
    # vmlinuz) and no rpm database.
    rm -rf "$w/root/boot" "$w/root/var/lib/rpm" "$w/ref.sqsh"
    read -r m_secs m_rss m_cpu < <(t mksquashfs "$w/root" "$w/ref.sqsh" -noappend -reproducible -mkfs-time 0 -all-time 0 -all-root -comp zstd -Xcompression-level $level -no-progress)
    echo "$r_secs $m_secs $m_rss $r_cpu $m_cpu" >>"$w/s.times"
    # The floor in every round, beside what it is the floor of: this VM's
    # speed moves by a quarter within minutes.
    echo "   round $round: CPU floor: rpm2cpio of every package, mksquashfs on one processor"
    read -r _ _ d_cpu < <(t sh -c 'for r; do rpm2cpio "$r" >/dev/null; done' _ "${rpms[@]}")
    read -r _ _ c_cpu < <(t mksquashfs "$w/root" "$w/floor.sqsh" -noappend -reproducible -all-root -comp zstd -Xcompression-level $level -processors 1 -no-progress)
    echo "$d_cpu $c_cpu" >>"$w/f.times"
  done
  local b_size m_size
  b_size=$(stat -c %s "$w/out/x86_64/rootfs.sqsh")
  m_size=$(stat -c %s "$w/ref.sqsh")
  echo "   rebuild, nothing changed (the same output)"
  t "$B" build -q --spec "$spec" --lock "$w/lock.json" --cache "$work/cache" --out "$w/out" >"$w/re.time"
  echo "   rebuild, the init package changed (step caches warm)"
  "$B" lock -q --spec "$changed" --cache "$work/cache" -o "$w/changed.lock.json"
  t "$B" build -q --spec "$changed" --lock "$w/changed.lock.json" --cache "$work/cache" --out "$w/out-changed" >"$w/ch.time"
  python3 - "$name" "$w" "$b_size" "$m_size" "$cores" "$level" <<'PY' | tee -a "$work/summary"
import statistics, sys
name, w, bsize, msize, cores, level = sys.argv[1:]
bsize, msize, cores = int(bsize), int(msize), int(cores)
bt = [list(map(float, l.split())) for l in open(w + "/b.times")]
st = [list(map(float, l.split())) for l in open(w + "/s.times")]
ft = [list(map(float, l.split())) for l in open(w + "/f.times")]
re = list(map(float, open(w + "/re.time").read().split()))
ch = list(map(float, open(w + "/ch.time").read().split()))
med = statistics.median
b, bcpu, brss = med(x[0] for x in bt), med(x[2] for x in bt), max(x[1] for x in bt)
pair, pcpu = med(x[0] + x[1] for x in st), med(x[3] + x[4] for x in st)
# The floor of each round; the ratios divide medians.
d, c = med(x[0] for x in ft), med(x[1] for x in ft)
floor = med((x[0] + x[1]) / cores for x in ft)
print(f"\n{name}: rounds builder {[x[0] for x in bt]} s, rpm + mksquashfs {[round(x[0] + x[1], 1) for x in st]} s, floor {[round((x[0] + x[1]) / cores, 1) for x in ft]} s")
print(f"  builder / floor by round      {[round(x[0] / ((y[0] + y[1]) / cores), 2) for x, y in zip(bt, ft)]}")
print(f"  builder build (cold)          {b:6.1f} s   CPU {bcpu:6.1f} s   peak RSS {brss/1024:5.0f} MiB   rootfs.sqsh {bsize/1048576:.1f} MiB")
print(f"  rpm -i + mksquashfs           {pair:6.1f} s   CPU {pcpu:6.1f} s   mksquashfs RSS {max(x[2] for x in st)/1024:.0f} MiB   squashfs {msize/1048576:.1f} MiB")
print(f"  ratio builder / standard      {b/pair:6.2f}     (target <= 0.60)")
print(f"  size ours / mksquashfs        {bsize/msize:6.3f}     (target <= 1.02)")
print(f"  floor: (decompression {d:.1f} s + zstd-{level} on one core {c:.1f} s) / {cores} cores = {floor:.1f} s; builder wall {b/floor:.2f}x, CPU/cores {bcpu/cores/floor:.2f}x (target <= 1.1)")
print(f"  rebuild, nothing changed      {re[0]:6.1f} s   peak RSS {re[1]/1024:5.0f} MiB   (target < 2 s, < 300 MB)")
print(f"  rebuild, one package changed  {ch[0]:6.1f} s   peak RSS {ch[1]/1024:5.0f} MiB   {100*ch[0]/b:.0f}% of cold (target <= 10%)")
PY
}

: >"$work/summary"
for base in ${BENCH_BASES:-real real-lzma test}; do
  case $base in
  real | real-lzma)
    payload=xz; [ "$base" = real-lzma ] && payload=lzma
    echo "== $base: scripts/mkrealbase.sh ($payload payloads)"
    REALBASE_PAYLOAD=$payload bash scripts/mkrealbase.sh "$work/$base-repo" >"$work/$base-mkrealbase.log" 2>&1 ||
      { tail "$work/$base-mkrealbase.log"; exit 1; }
    spec=$(realspec "$base" "$work/$base-repo/repo" "$testrepo")
    changed=$(realspec "$base-changed" "$work/$base-repo/repo" "$work/changed/repo")
    mapfile -t rpms < <(find "$work/$base-repo/repo" -name '*.rpm' | sort)
    ;;
  test)
    spec=$testspec
    mkdir -p "$work/test-changed" && cp "$testspec" "$work/test-changed/spec.yaml"
    cp -r "$(dirname "$testspec")/extensions" "$work/test-changed/" 2>/dev/null || true
    sed -i "s|^    url: repo$|    url: $work/changed/repo|" "$work/test-changed/spec.yaml"
    changed=$work/test-changed/spec.yaml
    mapfile -t rpms < <(find "$testrepo" -name '*.rpm' | sort)
    ;;
  *) echo "unknown base $base (real, real-lzma, test)" >&2; exit 2 ;;
  esac
  bench "$base" "$spec" "$changed" "${rpms[@]}"
done
echo; echo "== summary"; cat "$work/summary"
