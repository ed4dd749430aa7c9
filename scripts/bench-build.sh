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
# cost of a rebuild with nothing changed and after one package changed.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/nodeforge-bench}
mkdir -p "$work"
B=$work/builder
CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}" go build -o "$B" ./cmd/builder
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

# The step caches (laid packages, compressed squashfs blocks) go before
# each timed build: it is cold but for the downloads. Builder and the
# standard pair alternate, ROUNDS times (default 3), and the medians are
# compared: a shared machine's speed drifts by seconds.
drop_step_caches() { rm -rf "$work/cache/laid" "$work/cache/squashfs-packs"; }
: >"$work/b.times"; : >"$work/s.times"
for round in $(seq "${ROUNDS:-3}"); do
  echo "== round $round: builder build, warm download cache, empty step caches"
  drop_step_caches
  read -r b_secs b_rss < <(t "$B" build -q --spec "$spec" --lock "$work/bench.lock.json" --cache "$work/cache" --out "$work/out")
  echo "$b_secs $b_rss" >>"$work/b.times"

  echo "== round $round: rpm -i --root + mksquashfs -comp zstd"
  rm -rf "$work/root" && mkdir -p "$work/root"
  read -r r_secs r_rss < <(t rpm -i --root "$work/root" --dbpath /var/lib/rpm --nodeps --noscripts --nosignature --nodigest "${rpms[@]}")
  # What the node OS image holds: no /boot (the kernel ships as vmlinuz) and
  # no rpm database (nothing installs packages on an immutable node).
  rm -rf "$work/root/boot" "$work/root/var/lib/rpm"
  rm -f "$work/ref.sqsh"
  read -r m_secs m_rss < <(t mksquashfs "$work/root" "$work/ref.sqsh" -noappend -reproducible -mkfs-time 0 -all-time 0 -all-root -comp zstd -no-progress)
  echo "$r_secs $m_secs $m_rss" >>"$work/s.times"
done
b_size=$(stat -c %s "$work/out/x86_64/rootfs.sqsh")
m_size=$(stat -c %s "$work/ref.sqsh")

echo "== CPU floor"
read -r d_secs _ < <(t sh -c "for r in ${rpms[*]}; do rpm2cpio \$r >/dev/null; done")
# squashfs compression at our level, in 128 KiB blocks, on one core:
# mksquashfs itself with one processor.
rm -f "$work/floor.sqsh"
read -r c_secs _ < <(t mksquashfs "$work/root" "$work/floor.sqsh" -noappend -reproducible -all-root -comp zstd -Xcompression-level 13 -processors 1 -no-progress)

echo "== rebuild, nothing changed (step caches warm)"
read -r rb_secs rb_rss < <(t "$B" build -q --spec "$spec" --lock "$work/bench.lock.json" --cache "$work/cache" --out "$work/out-re")

echo "== rebuild after one package changed"
# A copy of the base where nodeforge-testinit is rebuilt with a changed
# init binary (a marker appended: new bytes, new RPM sha256), re-indexed
# and re-locked; the kernel and filesystem packages are the same files.
rm -rf "$work/base2" "$work/pkg2" && cp -r "$base" "$work/base2" && mkdir -p "$work/pkg2/root"
init_rpm=$(ls "$work/base2"/repo/RPMS/nodeforge-testinit-*.rpm)
(cd "$work/pkg2/root" && rpm2cpio "$init_rpm" | cpio -idm --quiet)
printf 'bench: changed package\n' >> "$work/pkg2/root/usr/libexec/nodeforge/init"
cat > "$work/pkg2/init.spec" <<SPEC
Name: nodeforge-testinit
Version: $(rpm -qp --qf '%{VERSION}' "$init_rpm")
Release: $(rpm -qp --qf '%{RELEASE}' "$init_rpm")
Summary: test init, changed for the benchmark
License: MIT
%description
Changed copy.
%install
cp -a $work/pkg2/root/. %{buildroot}/
%files
%dir /usr/libexec/nodeforge
/usr/libexec/nodeforge/init
SPEC
rm -f "$init_rpm"
rpmbuild -bb --quiet --define "_topdir $work/pkg2/top" --define "_rpmdir $work/base2/repo/RPMS" \
  --define '_build_id_links none' --define '__strip /bin/true' --define '_rpmfilename %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm' \
  "$work/pkg2/init.spec" >/dev/null 2>&1
createrepo_c -q "$work/base2/repo"
"$B" lock -q --spec "$work/base2/spec.yaml" --cache "$work/cache" -o "$work/base2.lock.json"
# (lock fetched the changed package into the download cache.)
read -r ch_secs ch_rss < <(t "$B" build -q --spec "$work/base2/spec.yaml" --lock "$work/base2.lock.json" --cache "$work/cache" --out "$work/out-changed")

python3 - "$work" "$b_size" "$m_size" "$d_secs" "$c_secs" "$cores" "$rb_secs" "$rb_rss" "$ch_secs" "$ch_rss" <<'PY'
import statistics, sys
work, bsize, msize, d, c, cores, rb, rbrss, ch, chrss = sys.argv[1:]
d, c, rb, ch = map(float, (d, c, rb, ch)); bsize, msize, cores = int(bsize), int(msize), int(cores)
bt = [l.split() for l in open(work + "/b.times")]
st = [l.split() for l in open(work + "/s.times")]
b = statistics.median(float(x[0]) for x in bt); brss = max(int(x[1]) for x in bt)
r = statistics.median(float(x[0]) for x in st); m = statistics.median(float(x[1]) for x in st)
pair = statistics.median(float(x[0]) + float(x[1]) for x in st); mrss = max(int(x[2]) for x in st)
print()
print(f"rounds: builder {[float(x[0]) for x in bt]} s, rpm -i + mksquashfs {[round(float(x[0]) + float(x[1]), 2) for x in st]} s")
print(f"builder build (cold)         {b:7.1f} s   peak RSS {brss//1024} MiB   rootfs.sqsh {bsize/1048576:.1f} MiB   (medians)")
print(f"rpm -i + mksquashfs          {pair:7.1f} s   ({r:.1f} + {m:.1f}; mksquashfs RSS {mrss//1024} MiB)   squashfs {msize/1048576:.1f} MiB")
print(f"ratio builder / standard     {b/pair:7.2f}   (target <= 0.60)")
print(f"size ours / mksquashfs       {bsize/msize:7.3f}   (target <= 1.05)")
floor = (d + c) / cores
print(f"CPU floor (decompress {d:.1f} s + squashfs zstd-13 on one core {c:.1f} s) / {cores} cores = {floor:.1f} s; builder at {b/floor:.2f}x the floor")
print(f"rebuild, nothing changed     {rb:7.1f} s   ({100*rb/b:.0f}% of the cold build)   peak RSS {int(rbrss)//1024} MiB")
print(f"rebuild, one package changed {ch:7.1f} s   ({100*ch/b:.0f}% of the cold build, target <= 10%)   peak RSS {int(chrss)//1024} MiB")
PY
