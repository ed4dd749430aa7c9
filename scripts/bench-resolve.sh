#!/usr/bin/env bash
# Benchmark (issue 16): `builder resolve` against dnf (libsolv) on one
# synthetic 20,000-package rpm-md repository (primary and filelists, gzip,
# with checksums: synth.RPMMD (pkgbase/resolve/internal/synth) written by
# pkgbase/resolve/internal/synthrepo), resolving the synthetic node OS.
# Not part of CI.
#
#   scripts/bench-resolve.sh [WORKDIR]
#
# ROUNDS (default 7) alternating rounds, each timing:
#   dnf       dnf --assumeno install with a fresh cache directory and an
#             empty install root (it downloads, parses and writes its .solv
#             files every time);
#   cold      builder resolve with an empty --cache (it parses the indexes
#             and writes its parsed-index cache);
#   warm      builder resolve with the cache a previous run left;
#   base      (when BUILDER_BASE names another builder binary, e.g. one
#             built from an older commit) that binary, as it runs.
# Medians are compared; the chosen package sets must be equal (dnf's
# transaction against builder's output), and builder's output must be
# byte-identical cold, warm and without a cache. The repository is
# generated once into WORKDIR (again when the generator changes).
#
# Environment: ROUNDS, N (packages, default 20000), BUILDER (a builder
# binary to use instead of building one), BUILDER_BASE.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/nodeforge-bench-resolve}
rounds=${ROUNDS:-7}
n=${N:-20000}
mkdir -p "$work"
work=$(cd "$work" && pwd)
export CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}"

command -v dnf >/dev/null || { echo "needs dnf (apt-get install dnf)"; exit 1; }
command -v python3 >/dev/null || { echo "needs python3"; exit 1; }
B=${BUILDER:-$work/builder}
if [ -z "${BUILDER:-}" ]; then
  go build -o "$B" ./cmd/builder
fi

# The repository, generated again when its generator changes.
repo=$work/repo-$n
stamp=$(cat pkgbase/resolve/internal/synth/synth.go pkgbase/resolve/internal/synth/rpmmd.go pkgbase/repo/rpmmdwrite.go \
  pkgbase/resolve/internal/synthrepo/main.go | sha256sum | cut -c1-16)-$n
if [ "$(cat "$repo/stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "== generating a $n-package rpm-md repository in $repo"
  rm -rf "$repo" "$repo.tmp"
  go run ./pkgbase/resolve/internal/synthrepo -n "$n" -seed 1 -out "$repo.tmp"
  echo "$stamp" >"$repo.tmp/stamp"
  mv "$repo.tmp" "$repo"
fi
mapfile -t reqs <"$repo/requests"
installonly=$(paste -sd, "$repo/installonly")
echo "repository: $(du -sh "$repo/repodata" | cut -f1) of metadata; ${#reqs[@]} requested packages"
dnf --version | head -1 | sed 's/^/dnf /'

# timed NAME CMD...: runs CMD, output to $work/NAME.out, appends its wall
# time and its CPU time (user + system, children included) in seconds to
# $work/NAME.times and $work/NAME.cpu.
timed() {
  local name=$1 rc=0 real user sys TIMEFORMAT='%3R %3U %3S'
  shift
  { time "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?; } 2>"$work/time.txt"
  read -r real user sys <"$work/time.txt"
  echo "$real" >>"$work/$name.times"
  awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}' >>"$work/$name.cpu"
  return $rc
}

run_dnf() {
  rm -rf "$work/dnf-cache" "$work/dnf-root"
  mkdir -p "$work/dnf-cache" "$work/dnf-root"
  # --assumeno exits 1 after printing the transaction.
  dnf --installroot="$work/dnf-root" --setopt=reposdir=/dev/null --setopt=cachedir="$work/dnf-cache" \
    --setopt=install_weak_deps=False --nogpgcheck --repofrompath=syn,"file://$repo" --repo=syn \
    --forcearch=x86_64 --releasever=1 --setopt=installonlypkgs="$installonly" \
    --assumeno install "${reqs[@]}" || true
}
builder_args=(resolve --repo "$repo" --insecure-skip-verify --arch x86_64)
run_cold() {
  rm -rf "$work/cache-cold"
  "$B" "${builder_args[@]}" --cache "$work/cache-cold" "${reqs[@]}"
}
run_warm() { "$B" "${builder_args[@]}" --cache "$work/cache-warm" "${reqs[@]}"; }
run_base() { "$BUILDER_BASE" "${builder_args[@]}" "${reqs[@]}"; }

names=(dnf cold warm)
if [ -n "${BUILDER_BASE:-}" ]; then
  names+=(base)
fi
for x in "${names[@]}"; do : >"$work/$x.times"; : >"$work/$x.cpu"; done

# Prime the warm cache; check that every way of running builder prints the
# same bytes.
rm -rf "$work/cache-warm"
run_warm >"$work/prime.out"
"$B" "${builder_args[@]}" --cache "" "${reqs[@]}" >"$work/nocache.out"
cmp -s "$work/prime.out" "$work/nocache.out" || { echo "builder's output differs with and without a cache"; exit 1; }

for r in $(seq "$rounds"); do
  # Alternate the order so that neither side always runs first.
  if [ $((r % 2)) -eq 1 ]; then order=("${names[@]}"); else order=($(printf '%s\n' "${names[@]}" | tac)); fi
  for x in "${order[@]}"; do
    timed "$x" "run_$x" || { echo "$x failed:"; cat "$work/$x.err"; exit 1; }
  done
  for x in cold warm; do
    cmp -s "$work/$x.out" "$work/nocache.out" || { echo "round $r: builder $x printed something else"; exit 1; }
  done
  printf 'round %d:' "$r"
  for x in "${names[@]}"; do printf ' %s %.3fs' "$x" "$(tail -1 "$work/$x.times")"; done
  echo
done

# The chosen sets: dnf's transaction against builder's output.
python3 - "$work/dnf.out" "$work/nocache.out" <<'EOF'
import sys
text = open(sys.argv[1]).read()
fields, in_table, installing = [], False, False
for line in text.splitlines():
    if line.startswith("Transaction Summary"):
        in_table = False
    elif line.startswith("====="):
        pass
    elif line.startswith(" Package "):
        in_table = True
    elif not in_table:
        pass
    elif not line.startswith(" ") and line.endswith(":"):
        installing = line.startswith("Installing") or line.startswith("Upgrading")
    elif installing:
        fields += line.split()
arches = {"x86_64", "noarch", "i686", "i586", "aarch64"}
dnf, i = set(), 0
while i + 3 < len(fields):
    if fields[i + 1] in arches and fields[i + 3] == "syn":
        dnf.add(f"{fields[i]}-{fields[i+2]}.{fields[i+1]}")
        i += 4
    else:
        i += 1
ours = set(open(sys.argv[2]).read().split())
if not dnf:
    sys.exit("no transaction in dnf's output:\n" + text)
if dnf != ours:
    print(f"chosen sets differ: {len(dnf)} packages by dnf, {len(ours)} by builder")
    print("dnf only:    ", sorted(dnf - ours))
    print("builder only:", sorted(ours - dnf))
    sys.exit(1)
print(f"chosen sets equal: {len(ours)} packages")
EOF

python3 - "$work" "${names[@]}" <<'EOF'
import statistics, sys
work, names = sys.argv[1], sys.argv[2:]
t = {n: [float(x) for x in open(f"{work}/{n}.times").read().split()] for n in names}
c = {n: [float(x) for x in open(f"{work}/{n}.cpu").read().split()] for n in names}
label = {"dnf": "dnf --assumeno install (fresh cache)", "cold": "builder resolve, cold (no index cache)",
         "warm": "builder resolve, warm (index cache)", "base": "BUILDER_BASE resolve"}
print(f"\n{'':42} {'median':>8} {'min':>8} {'max':>8} {'CPU':>8}   ({len(t['dnf'])} rounds, seconds; CPU: median user+system)")
for n in names:
    print(f"{label[n]:42} {statistics.median(t[n]):8.3f} {min(t[n]):8.3f} {max(t[n]):8.3f} {statistics.median(c[n]):8.3f}")
d = statistics.median(t["dnf"])
print(f"\ncold / dnf: {statistics.median(t['cold']) / d:.2f} (target <= 0.5)   warm: {statistics.median(t['warm']):.3f}s (target < 0.2)")
if "base" in t:
    print(f"base / dnf: {statistics.median(t['base']) / d:.2f}")
EOF
