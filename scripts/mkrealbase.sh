#!/bin/bash
# mkrealbase.sh OUT_DIR : a realistic rpm-md package base made from REAL Debian binary packages
# (a minimal container host: the distribution kernel with all its modules, libc, coreutils,
# util-linux, iproute2, containerd, runc, filesystem tools, iptables, ...), for timing an OS image
# builder against `rpm --root` + `mksquashfs`.
#
#   * the .debs are fetched with `apt-get download` into $REALBASE_CACHE/debs (default
#     /tmp/realbase-cache), so reruns do not download again;
#   * each .deb becomes one RPM (rpmbuild over its `dpkg-deb -x` tree): same name, Debian
#     version made RPM-safe (epoch kept as Epoch, '-' never in Version/Release), x86_64 or noarch,
#     AutoReqProv: no, Requires = its Debian Pre-Depends/Depends restricted to the set
#     (unversioned), Provides = its name (+ its Debian virtual names), conffiles as
#     %config(noreplace), xz payload, reproducible build settings;
#   * every RPM is signed with a throwaway key kept in OUT_DIR/key (public part:
#     OUT_DIR/RPM-GPG-KEY-test); signatures use a frozen clock so they are reproducible too;
#   * OUT_DIR/repo is an rpm-md repository (createrepo_c); OUT_DIR/packages.txt (names),
#     OUT_DIR/meta-requires.txt (what to resolve: every package), OUT_DIR/skipped.txt,
#     OUT_DIR/realbase.repo (a dnf .repo stanza for the repository).
#
# Idempotent: an RPM is rebuilt only when its .deb, its generated spec, this script or the key
# changed (OUT_DIR/state/NAME.id); RPMs no longer in the set are removed. FORCE=1 rebuilds all.
# Environment: REALBASE_PKGS (space-separated list, "a|b" = first of the alternatives that
# exists), REALBASE_RENAME ("debname=rpmname,..." renames a package, which still provides its Debian
# name; e.g. the kernel as kernel-image-deb for builders that expect ALT's kernel naming), REALBASE_CACHE, SOURCE_DATE_EPOCH (default 1700000000), JOBS (default nproc), REALBASE_PAYLOAD (xz, the default, or
# lzma: ALT's older packages carry lzma payloads).
# Needs (Debian 12): apt, dpkg-deb, rpm (rpmbuild, rpmsign), createrepo-c, gnupg, python3.
set -euo pipefail

usage() { echo "usage: $0 OUT_DIR" >&2; exit 2; }
[ $# -eq 1 ] || usage
for t in apt-get apt-cache dpkg-deb rpmbuild rpmsign rpm createrepo_c gpg gpgconf python3 sha256sum xargs; do
  command -v "$t" >/dev/null || { echo "mkrealbase: missing tool: $t" >&2; exit 1; }
done

T0=$(date +%s.%N)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
CACHE=${REALBASE_CACHE:-/tmp/realbase-cache}
SDE=${SOURCE_DATE_EPOCH:-1700000000}
export SOURCE_DATE_EPOCH=$SDE
JOBS=${JOBS:-$(nproc)}
PAYLOAD=${REALBASE_PAYLOAD:-xz}
case $PAYLOAD in
  xz) PAYLOAD_IO=w6.xzdio ;;
  lzma) PAYLOAD_IO=w6.lzdio ;;
  *) echo "mkrealbase: REALBASE_PAYLOAD is xz or lzma, not $PAYLOAD" >&2; exit 2 ;;
esac
SELF_SHA="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-64) $PAYLOAD"
KEYDIR=$OUT/key
KEYUID="Realbase Throwaway Signing Key <realbase@example.invalid>"
FAKETIME=$(date -u -d "@$SDE" +%Y%m%dT%H%M%S)!
mkdir -p "$CACHE/debs" "$OUT/repo" "$OUT/state"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/realbase-build.XXXXXX")
cleanup() {
  [ -d "$KEYDIR" ] && gpgconf --homedir "$KEYDIR" --kill gpg-agent >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "mkrealbase: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# 1. the package set
DEFAULT_PKGS="
  @kernel kmod busybox-static bash coreutils libc6 libgcc-s1 libselinux1 libpcre2-8-0
  libacl1|libacl1t64 libattr1|libattr1t64 util-linux mount libmount1 libblkid1 libuuid1
  libsmartcols1 iproute2 libmnl0 libelf1|libelf1t64 libcap2 zlib1g libzstd1 liblzma5
  containerd runc btrfs-progs e2fsprogs xfsprogs iptables libnftnl11 libxtables12 conntrack
  ca-certificates tzdata base-files netbase libssl3|libssl3t64 libseccomp2 libsystemd0
  libkmod2 libcrypt1 libtinfo6
  gcc-12-base|gcc-13-base|gcc-14-base libgmp10 libgcrypt20 libgpg-error0|libgpg-error0t64
  liblz4-1 libudev1 libcap-ng0 libext2fs2|libext2fs2t64 libcom-err2 libss2 logsave liblzo2-2
  libip4tc2 libip6tc2 libnetfilter-conntrack3 libnfnetlink0 debianutils"
PKGS=${REALBASE_PKGS:-$DEFAULT_PKGS}

: > "$WORK/skipped"
skip() { printf '%s\t%s\n' "$1" "$2" >> "$WORK/skipped"; log "skipping $1: $2"; }
candidate() { awk -F'\t' -v n="$1" '$1 == n {print $2; exit}' "$WORK/cand"; }
kernel_pkg() {  # the kernel flavour linux-image-amd64 points at, else the newest 6.1.0-*-amd64
  local k
  k=$(apt-cache depends linux-image-amd64 2>/dev/null \
        | awk '$1=="Depends:" && $2 ~ /^linux-image-6\.1\.0-[0-9]+-amd64$/ {print $2; exit}')
  [ -n "$k" ] || k=$(apt-cache pkgnames linux-image-6.1.0- 2>/dev/null \
        | grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V | tail -1)
  echo "$k"
}

: > "$WORK/want"   # name <TAB> version
specs=()
for spec in $PKGS; do
  if [ "$spec" = "@kernel" ]; then
    spec=$(kernel_pkg)
    [ -n "$spec" ] || { skip linux-image-6.1.0-N-amd64 "no linux-image-6.1.0-*-amd64 known to apt"; continue; }
  fi
  specs+=("$spec")
done
# installable candidate versions, one apt-cache call for all names: NAME <TAB> VERSION
# shellcheck disable=SC2046
apt-cache policy $(printf '%s\n' "${specs[@]}" | tr '|' '\n' | sort -u) 2>/dev/null \
  | awk '/^[^ ].*:$/ {n=substr($0, 1, length($0)-1); sub(/:amd64$/, "", n); next}
         /^  Candidate:/ && n != "" && $2 != "(none)" {print n "\t" $2; n=""}' > "$WORK/cand"
for spec in "${specs[@]}"; do
  got=
  for alt in ${spec//|/ }; do
    v=$(candidate "$alt")
    if [ -n "$v" ]; then got=$alt; break; fi
  done
  if [ -z "$got" ]; then skip "$spec" "no installable candidate in the configured apt sources"; continue; fi
  cut -f1 "$WORK/want" | grep -qxF "$got" || printf '%s\t%s\n' "$got" "$v" >> "$WORK/want"
done

# 2. download what the cache lacks (apt-get download names files NAME_VERSION(':'->'%3a')_ARCH.deb)
debfile() { compgen -G "$CACHE/debs/${1}_${2//:/%3a}_*.deb" | head -1 || true; }
missing=()
while IFS=$'\t' read -r n v; do [ -n "$(debfile "$n" "$v")" ] || missing+=("$n=$v"); done < "$WORK/want"
if [ ${#missing[@]} -gt 0 ]; then
  log "downloading ${#missing[@]} package(s) into $CACHE/debs"
  if ! (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "${missing[@]}" >"$WORK/dl.log" 2>&1); then
    for m in "${missing[@]}"; do   # one at a time, so a single bad one only skips itself
      (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "$m" >>"$WORK/dl.log" 2>&1) || true
    done
  fi
fi
: > "$WORK/debs"
while IFS=$'\t' read -r n v; do
  f=$(debfile "$n" "$v")
  if [ -n "$f" ]; then echo "$f" >> "$WORK/debs"; else skip "$n" "apt-get download failed"; fi
done < "$WORK/want"
[ -s "$WORK/debs" ] || { log "no packages to convert"; exit 1; }

# 3. the throwaway signing key (frozen clock: key and signatures carry SOURCE_DATE_EPOCH)
if ! gpg --homedir "$KEYDIR" --batch --list-secret-keys "$KEYUID" >/dev/null 2>&1; then
  log "generating a throwaway signing key in $KEYDIR"
  rm -rf "$KEYDIR"; mkdir -m 700 "$KEYDIR"
  gpg --homedir "$KEYDIR" --batch --quiet --faked-system-time "$FAKETIME" --passphrase '' \
      --quick-gen-key "$KEYUID" rsa3072 sign never 2>/dev/null
fi
gpg --homedir "$KEYDIR" --batch --armor --export "$KEYUID" > "$OUT/RPM-GPG-KEY-test" 2>/dev/null
KEYFPR=$(gpg --homedir "$KEYDIR" --batch --with-colons --list-keys "$KEYUID" 2>/dev/null | awk -F: '$1=="fpr"{print $10; exit}')

# 4. plan: control data -> spec per package (python helper)
HELPER=$WORK/helper.py
cat > "$HELPER" <<'PYEOF'
import hashlib, json, os, re, shutil, subprocess, sys

def control(deb):
    raw = subprocess.run(['dpkg-deb', '-f', deb], check=True, capture_output=True).stdout.decode('utf-8', 'replace')
    fields, key = {}, None
    for line in raw.splitlines():
        if line[:1] in (' ', '\t') and key:
            fields[key] += '\n' + line
        elif ':' in line:
            key, val = line.split(':', 1)
            fields[key.strip()] = val.strip()
    return fields

def names(rel):
    """Debian relationship field -> list of alternatives lists of bare names."""
    out = []
    for clause in filter(None, (c.strip() for c in rel.split(','))):
        alts = []
        for a in clause.split('|'):
            a = re.sub(r'\(.*?\)|\[.*?\]|<.*?>', '', a).strip().split(':')[0].strip()
            if a: alts.append(a)
        if alts: out.append(alts)
    return out

def rpm_evr(debver):
    epoch, _, rest = debver.partition(':') if ':' in debver else ('', '', debver)
    up, sep, rev = rest.rpartition('-')
    if not sep: up, rev = rest, '0'
    safe = lambda s: re.sub(r'[^A-Za-z0-9._+~^]', '_', s)   # no '-' (nor ':') in an RPM version/release
    return epoch, safe(up), safe(rev) or '0'

def pct(s): return s.replace('%', '%%')

def plan(debs_file, out_json, specdir, salt):
    debs = [l.strip() for l in open(debs_file) if l.strip()]
    pk = {}
    for deb in debs:
        c = control(deb)
        pk[c['Package']] = dict(deb=deb, c=c)
    virt = {}   # virtual name -> providers in the set
    for n, p in pk.items():
        p['provides'] = [a[0] for a in names(p['c'].get('Provides', '')) if a[0] != n]
        for v in p['provides']: virt.setdefault(v, []).append(n)
    res = {}
    for n in sorted(pk):
        p, c = pk[n], pk[n]['c']
        epoch, ver, rel = rpm_evr(c['Version'])
        arch = 'noarch' if c.get('Architecture') == 'all' else 'x86_64'
        reqs = []
        for alts in names(c.get('Pre-Depends', '')) + names(c.get('Depends', '')):
            pick = next((a for a in alts if a in pk or a in virt), None)
            if pick and pick != n and pick not in p['provides'] and pick not in reqs:
                reqs.append(pick)
        desc = c.get('Description', n).split('\n')
        summary = desc[0].strip() or n
        body = []
        for l in desc[1:]:
            l = l[1:] if l.startswith(' ') else l
            body.append('' if l.strip() == '.' else l)
        body = '\n'.join(body).strip() or summary
        evr = (epoch + ':' if epoch else '') + ver + '-' + rel
        rn = dict(x.split('=', 1) for x in os.environ.get('REALBASE_RENAME', '').split(',') if '=' in x).get(n, n)
        s = ['Name: ' + rn]
        if epoch: s.append('Epoch: ' + epoch)
        s += ['Version: ' + ver, 'Release: ' + rel, 'Summary: ' + pct(summary),
              'License: see /usr/share/doc/' + n + '/copyright']
        if c.get('Homepage'): s.append('URL: ' + pct(c['Homepage']))
        if arch == 'noarch': s.append('BuildArch: noarch')
        s += ['AutoReqProv: no', 'Provides: %s = %s' % (n, evr)]
        s += ['Provides: ' + v for v in p['provides']]
        s += ['Requires: ' + r for r in reqs]
        s += ['', '%description', pct(body), '',
              '%files -f %{realbase_filelist}', '%defattr(-,root,root,-)', '']
        spec = '\n'.join(s)
        open(os.path.join(specdir, n + '.spec'), 'w').write(spec)
        debsha = hashlib.sha256(open(p['deb'], 'rb').read()).hexdigest()
        res[n] = dict(deb=p['deb'], arch=arch, rpm='%s-%s-%s.%s.rpm' % (rn, ver, rel, arch),
                      id=hashlib.sha256((salt + '\0' + debsha + '\0' + spec).encode()).hexdigest(),
                      size=os.path.getsize(p['deb']), requires=reqs)
    json.dump(res, open(out_json, 'w'), indent=1, sort_keys=True)
    for n in sorted(res, key=lambda k: -res[k]['size']):   # biggest first, for the parallel build
        r = res[n]
        print('\t'.join([n, r['deb'], r['arch'], r['rpm'], r['id']]))

# rpm %files lines are macro-expanded, split on blanks ("..." quoting), and globbed; its escapes are
# not reliable, so every such character becomes the one-character wildcard '?': the glob then matches
# the file itself (and at worst other files of the same tree that are listed anyway).
SPECIAL = re.compile(r'[*?\[\]{}\\%"\s]')

def filelist(root, conffiles_path, out_path):
    conf = set()
    if os.path.exists(conffiles_path):
        for l in open(conffiles_path, encoding='utf-8', errors='surrogateescape'):
            t = [w for w in l.split() if w.startswith('/')]
            if t: conf.add(t[-1])
    lines, dropped = [], []
    def bad(p):
        return any(ord(ch) < 0x20 or ord(ch) == 0x7f or 0xdc80 <= ord(ch) <= 0xdcff for ch in p)
    for dp, dns, fns in os.walk(root):
        rel = dp[len(root):] or '/'
        for d in list(dns):
            full, r = os.path.join(dp, d), os.path.join(rel, d)
            if bad(r):   # rpm refuses control characters and non-UTF-8 in file names
                dropped.append(r); dns.remove(d)
                (os.unlink if os.path.islink(full) else shutil.rmtree)(full)
                continue
            lines.append(SPECIAL.sub('?', r) if os.path.islink(full) else '%dir ' + SPECIAL.sub('?', r))
        for f in fns:
            full, r = os.path.join(dp, f), os.path.join(rel, f)
            if bad(r):
                dropped.append(r); os.unlink(full); continue
            lines.append(('%config(noreplace) ' if r in conf else '') + SPECIAL.sub('?', r))
    lines.sort()
    with open(out_path, 'wb') as fh:
        fh.write(('\n'.join(lines) + '\n').encode('utf-8', 'surrogateescape'))
    for r in dropped:
        print('dropped unrepresentable path %s' % ascii(r), file=sys.stderr)

if sys.argv[1] == 'plan': plan(*sys.argv[2:6])
elif sys.argv[1] == 'files': filelist(*sys.argv[2:5])
PYEOF
mkdir -p "$WORK/specs" "$WORK/stage" "$WORK/b"
python3 "$HELPER" plan "$WORK/debs" "$WORK/plan.json" "$WORK/specs" "$SELF_SHA $KEYFPR" > "$WORK/plan.tsv"

# 5. what needs (re)building
: > "$WORK/todo"
while IFS=$'\t' read -r n deb arch rpmf id; do
  if [ "${FORCE:-0}" = 1 ] || [ ! -f "$OUT/repo/$rpmf" ] || [ "$(cat "$OUT/state/$n.id" 2>/dev/null)" != "$id" ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$deb" "$arch" "$rpmf" "$id" >> "$WORK/todo"
  fi
done < "$WORK/plan.tsv"
# drop RPMs and state that are no longer part of the set
cut -f4 "$WORK/plan.tsv" | sort > "$WORK/keep.rpm"
cut -f1 "$WORK/plan.tsv" | sort > "$WORK/keep.name"
find "$OUT/repo" -maxdepth 1 -name '*.rpm' -printf '%f\n' | sort | comm -23 - "$WORK/keep.rpm" \
  | while read -r f; do log "removing stale $f"; rm -f "$OUT/repo/$f"; done
find "$OUT/state" -maxdepth 1 -name '*.id' -printf '%f\n' | sed 's/\.id$//' | sort | comm -23 - "$WORK/keep.name" \
  | while read -r n; do rm -f "$OUT/state/$n.id"; done

# 6. convert (parallel, biggest first), sign, publish
build_one() {  # NAME DEB ARCH RPMFILE
  local n=$1 deb=$2 arch=$3 rpmf=$4 d=$WORK/b/$1
  local -a tgt=()
  [ "$arch" = noarch ] || tgt=(--target "$arch")
  rm -rf "$d"; mkdir -p "$d/root" "$d/ctrl" "$d/top" "$d/tmp"
  dpkg-deb -x "$deb" "$d/root" && dpkg-deb -e "$deb" "$d/ctrl" || { log "dpkg-deb failed on $deb"; return 1; }
  python3 "$HELPER" files "$d/root" "$d/ctrl/conffiles" "$d/files.list" 2>"$d/files.log" || { cat "$d/files.log" >&2; return 1; }
  [ -s "$d/files.log" ] && sed "s/^/mkrealbase: $n: /" "$d/files.log" >&2
  if ! LC_ALL=C rpmbuild -bb --noclean --buildroot "$d/root" "${tgt[@]}" \
      --define "_topdir $d/top" --define "_tmppath $d/tmp" --define "_rpmdir $WORK/stage" \
      --define '_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm' \
      --define "realbase_filelist $d/files.list" \
      --define "_binary_payload $PAYLOAD_IO" --define '_binary_filedigest_algorithm 8' \
      --define 'use_source_date_epoch_as_buildtime 1' --define 'clamp_mtime_to_source_date_epoch 1' \
      --define '_buildhost repro' \
      --define '__os_install_post %{nil}' --define '__spec_install_post %{nil}' \
      --define '__arch_install_post %{nil}' --define '_build_id_links none' \
      --define 'debug_package %{nil}' --define '_missing_build_ids_terminate_build 0' \
      "$WORK/specs/$n.spec" >"$d/rpmbuild.log" 2>&1 || [ ! -f "$WORK/stage/$rpmf" ]; then
    log "rpmbuild failed for $n:"; grep -av 'File listed twice' "$d/rpmbuild.log" | tail -15 >&2
    rm -f "$WORK/stage/$rpmf"; return 1
  fi
  rm -rf "$d"
}
export -f build_one log
export WORK HELPER SOURCE_DATE_EPOCH PAYLOAD_IO
NTODO=$(wc -l < "$WORK/todo")
NFAIL=0
if [ "$NTODO" -gt 0 ]; then
  log "converting $NTODO package(s) with $JOBS job(s)"
  cut -f1-4 "$WORK/todo" | tr '\t' '\n' \
    | xargs -d '\n' -n4 -P "$JOBS" bash -c 'build_one "$@"' _ || true
  shopt -s nullglob
  staged=("$WORK"/stage/*.rpm)
  if [ ${#staged[@]} -gt 0 ]; then
    rpmsign --define "__gpg /usr/bin/gpg" --define "_gpg_path $KEYDIR" --define "_gpg_name $KEYFPR" \
      --define "_gpg_sign_cmd_extra_args --faked-system-time $FAKETIME" \
      --addsign "${staged[@]}" >"$WORK/sign.log" 2>&1 || { cat "$WORK/sign.log" >&2; exit 1; }
    touch -h -d "@$SDE" "${staged[@]}"
  fi
  while IFS=$'\t' read -r n deb arch rpmf id; do
    if [ -f "$WORK/stage/$rpmf" ]; then
      mv -f "$WORK/stage/$rpmf" "$OUT/repo/$rpmf"
      echo "$id" > "$OUT/state/$n.id"
    else
      NFAIL=$((NFAIL + 1))
      printf '%s\t%s\n' "$n" "rpmbuild failed" >> "$WORK/skipped"
    fi
  done < "$WORK/todo"
  # an older version of a rebuilt package may linger under another file name: keep only planned files
  find "$OUT/repo" -maxdepth 1 -name '*.rpm' -printf '%f\n' | sort | comm -23 - "$WORK/keep.rpm" \
    | while read -r f; do rm -f "$OUT/repo/$f"; done
else
  log "all $(wc -l < "$WORK/plan.tsv") RPMs up to date"
fi

# 7. repository metadata and lists
find "$OUT/repo" -maxdepth 1 -name '*.rpm' -exec touch -h -d "@$SDE" {} +
createrepo_c --quiet --workers "$JOBS" --no-database --revision "$SDE" --set-timestamp-to-revision \
  "$OUT/repo" >"$WORK/createrepo.log" 2>&1 || { cat "$WORK/createrepo.log" >&2; exit 1; }
for f in "$OUT"/repo/*.rpm; do rpm -qp --nosignature --qf '%{NAME}\n' "$f"; done | sort > "$OUT/packages.txt"
cp "$OUT/packages.txt" "$OUT/meta-requires.txt"
sort -u "$WORK/skipped" > "$OUT/skipped.txt"
cat > "$OUT/realbase.repo" <<EOF
[realbase]
name=realbase (Debian binary packages converted to RPM)
baseurl=file://$OUT/repo
enabled=1
gpgcheck=1
gpgkey=file://$OUT/RPM-GPG-KEY-test
EOF

# 8. summary
NRPM=$(wc -l < "$OUT/packages.txt")
RPMBYTES=$(find "$OUT/repo" -maxdepth 1 -name '*.rpm' -printf '%s\n' | awk '{s+=$1} END {printf "%d", s}')
INSTBYTES=$(rpm -qp --nosignature --qf '%{LONGSIZE}\n' "$OUT"/repo/*.rpm | awk '{s+=$1} END {printf "%d", s}')
T1=$(date +%s.%N)
echo "rpms: $NRPM (rebuilt this run: $((NTODO - NFAIL)), failed: $NFAIL, skipped: $(wc -l < "$OUT/skipped.txt"))"
echo "total rpm bytes (xz payloads + headers): $RPMBYTES ($(numfmt --to=iec-i --suffix=B "$RPMBYTES"))"
echo "total installed payload bytes: $INSTBYTES ($(numfmt --to=iec-i --suffix=B "$INSTBYTES"))"
echo "repo: $OUT/repo  key: $OUT/RPM-GPG-KEY-test"
awk -v a="$T0" -v b="$T1" 'BEGIN {printf "time: %.1f s\n", b - a}'
[ "$NFAIL" -eq 0 ]
