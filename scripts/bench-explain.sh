#!/usr/bin/env bash
# Benchmark (issue 20): builder why, diff and size at scale. Not part of CI.
#
#   scripts/bench-explain.sh [WORKDIR]
#
#   why    on the synthetic 20,000-package rpm-md repository of
#          scripts/bench-resolve.sh (synthrepo), its node OS as one
#          component: a package only some requests pull in transitively,
#          with the parsed-index cache warm (as a release engineer asks
#          again and again) and cold;
#   size   on a build directory whose root filesystem holds 10,000 files:
#          a report.json written here and a rootfs.sqsh made from the same
#          tree by mksquashfs (size reads the image's inodes);
#   diff   between that build directory and a second one with 5% of the
#          files changed, 1% removed and 1% added.
#
# Goal: each under 1 s. ROUNDS (default 5) runs each; medians are printed.
# Environment: ROUNDS, N (packages, default 20000), FILES (default 10000),
# BUILDER (a builder binary to use instead of building one).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/nodeforge-bench-explain}
rounds=${ROUNDS:-5}
n=${N:-20000}
files=${FILES:-10000}
mkdir -p "$work"
work=$(cd "$work" && pwd)
export CGO_CFLAGS="${CGO_CFLAGS:--O3 -g}"
command -v mksquashfs >/dev/null || { echo "needs mksquashfs (apt-get install squashfs-tools)"; exit 1; }
B=${BUILDER:-$work/builder}
if [ -z "${BUILDER:-}" ]; then
  go build -o "$B" ./cmd/builder
fi

# median FILE: the median of the numbers in FILE.
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# timed NAME CMD...: runs CMD ROUNDS times, its wall times in $work/NAME.times.
timed() {
  local name=$1 TIMEFORMAT='%3R'
  shift
  : >"$work/$name.times"
  for _ in $(seq "$rounds"); do
    { time "$@" >"$work/$name.out" 2>"$work/$name.err"; } 2>>"$work/$name.times" ||
      { echo "$name failed:"; cat "$work/$name.err"; exit 1; }
  done
  printf '%-10s median %.3f s over %d runs\n' "$name" "$(median "$work/$name.times")" "$rounds"
}

# why: the synthetic repository and a spec of it.
repo=$work/repo-$n
if [ ! -f "$repo/requests" ]; then
  echo "== generating a $n-package rpm-md repository in $repo"
  rm -rf "$repo"
  go run ./pkgbase/resolve/internal/synthrepo -n "$n" -seed 1 -out "$repo"
fi
mapfile -t reqs <"$repo/requests"
{
  echo "name: synthetic"
  echo "branch: synthetic"
  echo "version: 1.0.0"
  echo "architectures: [x86_64]"
  echo "repositories:"
  echo "  - {name: syn, url: $repo, format: rpm-md, insecure-skip-verify: true}"
  echo "multiversion: [$(sed 's/.*/"^&$"/' "$repo/installonly" | paste -sd, -)]"
  echo "components:"
  echo "  rootfs:"
  echo "    kind: rootfs"
  echo "    packages: [$(printf '%s\n' "${reqs[@]}" | sed 's/.*/"&"/' | paste -sd, -)]"
} >"$work/spec.yaml"
"$B" resolve --repo "$repo" --insecure-skip-verify --arch x86_64 --cache "$work/cache" "${reqs[@]}" >"$work/closure.txt"
# A package of the closure no request names (only pulled in), else the
# one every package needs.
target=$(awk -F- '{NF-=2; print}' OFS=- "$work/closure.txt" | grep -vxF -f "$repo/requests" | head -1 || true)
target=${target:-glibc-core}
echo "why: $(wc -l <"$work/closure.txt") packages in the closure; asking about $target"
timed why-warm "$B" why -q --spec "$work/spec.yaml" --cache "$work/cache" "$target"
timed why-cold "$B" why -q --spec "$work/spec.yaml" --cache "" "$target"
grep -c ' -> ' "$work/why-warm.out" | sed 's/^/why: /; s/$/ steps printed/'

# size and diff: two build directories of $files files.
python3 - "$work" "$files" <<'EOF'
import hashlib, json, os, random, shutil, sys
work, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(1)
def tree(name, files):
    root = os.path.join(work, name, "tree")
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    entries = []
    for path, data, pkg in files:
        full = root + path
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        entries.append({"path": path, "type": "file", "mode": "0644", "uid": 0, "gid": 0, "size": len(data),
                        "sha256": hashlib.sha256(data).hexdigest(), "origin": {"package": pkg}})
    return entries
files = []
for i in range(n):
    d = "/usr/%s/%s" % (rnd.choice(["bin", "lib", "lib64", "share", "libexec"]), "d%d" % (i % 97))
    size = int(rnd.lognormvariate(8, 1.5))
    files.append(("%s/f%05d" % (d, i), bytes(rnd.getrandbits(8) for _ in range(min(size, 4096))) * (size // 4096 + 1), "pkg%03d-1.0-alt1.x86_64" % (i % 300)))
changed = list(files)
for i in rnd.sample(range(n), n // 20):
    p, data, pkg = changed[i]
    changed[i] = (p, data + b"changed", pkg)
for i in sorted(rnd.sample(range(n), n // 100), reverse=True):
    del changed[i]
changed += [("/usr/new/f%05d" % i, b"new %d" % i, "pkgnew-1.0-alt1.x86_64") for i in range(n // 100)]
for name, fs in (("old", files), ("new", changed)):
    entries = tree(name, fs)
    rep = {"spec": {"name": "bench", "branch": "bench", "version": name, "sha256": "0" * 64}, "lockSha256": "0" * 64,
           "sourceDateEpoch": 0, "builder": "bench", "tools": {}, "ociIndex": "", "installer": "", "generators": {},
           "artifacts": {}, "architectures": {"x86_64": {"packages": sorted({e["origin"]["package"] for e in entries}),
           "kernel": None, "cmdline": "", "init": "", "scriptlets": [], "triggers": [], "unhandledScriptlets": 0, "ghosts": [],
           "dropped": [], "policy": {"setuid": [], "stripped": [], "worldWritable": [], "capabilities": []}, "libraries": [],
           "rootfs": entries, "initramfs": []}}}
    os.makedirs(os.path.join(work, name, "out", "x86_64"), exist_ok=True)
    with open(os.path.join(work, name, "out", "report.json"), "w") as f:
        json.dump(rep, f)
EOF
for side in old new; do
  mksquashfs "$work/$side/tree" "$work/$side/out/x86_64/rootfs.sqsh" -noappend -quiet -comp zstd >/dev/null
done
echo "size: $(find "$work/old/tree" -type f | wc -l) files, $(du -sh "$work/old/tree" | cut -f1) installed"
timed size "$B" size --format json "$work/old/out"
timed diff "$B" diff --format json "$work/old/out" "$work/new/out"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); a=[x for x in d["artifacts"] if x["name"]=="x86_64/rootfs.sqsh"][0]; print("diff: files +%d -%d ~%d" % (len(a["filesAdded"]), len(a["filesRemoved"]), len(a["filesChanged"])))' "$work/diff.out"
