#!/usr/bin/env bash
# Puts Debian 12 kernel packages (linux-image-6.1.0-N-amd64 and -arm64) and
# Debian's systemd-boot EFI binaries (systemd-boot-efi, amd64 and arm64)
# into the cache directory the kernel tests (kernel/debian_test.go) and the
# boot tests (builder/boot_test.go via pkgbase/testbase) read. The arm64
# packages come through apt's multiarch (dpkg --add-architecture arm64);
# nothing of them is installed. So do arm64 kmod and libc-bin, whose depmod
# and ldconfig judge our module indexes and ld.so.cache under qemu-user. Idempotent: downloads only what is not
# cached. So are the cri and btrfs extensions' Debian packages
# (extension-debs/, and their arm64 builds in extension-debs-arm64/). Usage: scripts/fetch-test-kernel.sh [--demo] [DIR]
# (default $NODEFORGE_CACHE_DIR or /var/cache/nodeforge). With --demo, only
# what the bootable demo base needs (make demo): the amd64 kernel,
# systemd-boot-efi and the cri and btrfs extensions' packages; nothing of
# arm64, no container images' packages and no change to apt's
# architectures.
set -euo pipefail

demo=
if [ "${1:-}" = --demo ]; then demo=1; shift; fi
dir=${1:-${NODEFORGE_CACHE_DIR:-/var/cache/nodeforge}}
# The package the tests pin (kernel.TestKernelPackage, testbase.DebianKernelPackage).
pinned=linux-image-6.1.0-57-amd64

cached() {
  local f
  for f in "$dir"/linux-image-6.1.0-*-amd64_*.deb; do
    case "$f" in *-cloud-amd64_*|*-rt-amd64_*) continue ;; esac
    [ -s "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.download-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt's sandbox user writes here when not root

# The EFI boot manager of the boot media test.
if ls "$dir"/systemd-boot-efi_*_amd64.deb >/dev/null 2>&1; then
  echo "systemd-boot-efi cached"
else
  (cd "$tmp" && { apt-get download -q systemd-boot-efi || { apt-get update -qq && apt-get download -q systemd-boot-efi; }; }) >&2
  mv "$tmp"/systemd-boot-efi_*.deb "$dir/"
  echo "systemd-boot-efi downloaded"
fi

# The demo needs the amd64 packages alone.
[ -n "$demo" ] && skip_arm64=1 || skip_arm64=

# The aarch64 test base: Debian's arm64 kernel and systemd-boot-efi,
# downloaded (never installed) through apt's multiarch.
arm64_pinned=linux-image-6.1.0-57-arm64
arm64_ready=
ensure_arm64() {
  [ -n "$arm64_ready" ] && return 0
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq
  arm64_ready=1
}
if [ -n "$skip_arm64" ]; then
  :
elif ls "$dir"/linux-image-6.1.0-*-arm64_*_arm64.deb >/dev/null 2>&1 && ls "$dir"/systemd-boot-efi_*_arm64.deb >/dev/null 2>&1; then
  echo "arm64 kernel and systemd-boot-efi cached"
else
  ensure_arm64
  current_arm64=$(apt-cache depends linux-image-arm64:arm64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-6\.1\.0-[0-9]+-arm64/ { sub(/:arm64$/, "", $2); print $2; exit }')
  got=
  for pkg in "$arm64_pinned" $current_arm64; do
    if (cd "$tmp" && apt-get download -q "$pkg:arm64") >&2; then got=$pkg; break; fi
  done
  [ -n "$got" ] || { echo "could not download an arm64 Debian kernel package into $dir" >&2; exit 1; }
  (cd "$tmp" && apt-get download -q systemd-boot-efi:arm64) >&2
  mv "$tmp"/*_arm64.deb "$dir/"
  echo "arm64 kernel ($got) and systemd-boot-efi downloaded"
fi

# The arm64 judges the tests run under qemu-user: kmod's depmod and
# glibc's ldconfig with the libraries they load (unpacked by the tests,
# never installed).
tools="$dir/arm64-tools"
tool_pkgs=(kmod libkmod2 liblzma5 libzstd1 libssl3 libc6 libc-bin)
if [ -n "$skip_arm64" ]; then
  :
elif [ -d "$tools" ] && [ "$(ls "$tools"/*_arm64.deb 2>/dev/null | wc -l)" -ge ${#tool_pkgs[@]} ]; then
  echo "arm64 judges cached"
else
  dl="$tmp/arm64-tools"
  mkdir -p "$dl" && chmod 755 "$dl"
  if ! (cd "$dl" && apt-get download -q "${tool_pkgs[@]/%/:arm64}") >&2; then
    ensure_arm64
    (cd "$dl" && apt-get download -q "${tool_pkgs[@]/%/:arm64}") >&2
  fi
  rm -rf "$tools" && mv "$dl" "$tools"
  echo "arm64 judges downloaded: ${tool_pkgs[*]}"
fi

# fetch_debs NAME WHAT PACKAGE...: Debian's amd64 packages (those of
# $deb_arch when set: deb_arch=arm64 fetch_debs ...) into $dir/NAME
# (downloaded, never installed), unless as many .debs are there already.
fetch_debs() {
  local name=$1 what=$2 dl arch=${deb_arch:-amd64}
  shift 2
  if [ -d "$dir/$name" ] && [ "$(ls "$dir/$name"/*.deb 2>/dev/null | wc -l)" -ge $# ]; then
    echo "$what packages cached"
    return 0
  fi
  dl="$tmp/$name"
  mkdir -p "$dl" && chmod 755 "$dl"
  if ! (cd "$dl" && apt-get download -q "${@/%/:$arch}") >&2; then
    if [ "$arch" = arm64 ]; then ensure_arm64 || return 1; else apt-get update -qq || return 1; fi
    (cd "$dl" && apt-get download -q "${@/%/:$arch}") >&2 || return 1
  fi
  rm -rf "${dir:?}/$name" && mv "$dl" "$dir/$name"
  echo "$what packages downloaded: $*"
}

# The extensions' boot test (builder/extensions_boot_test.go via
# pkgbase/testbase) and the bootable demo (pkgbase/demobase): Debian's
# containerd, runc and CNI plugins (the cri extension), btrfs-progs (btrfs)
# and the libraries they load, which the bases' roots carry
# (pkgbase/debext's lists).
ext_pkgs=(containerd runc containernetworking-plugins btrfs-progs
  libc6 libgcc-s1 libseccomp2 libblkid1 libcom-err2 libext2fs2 liblzo2-2 libudev1 libuuid1 libzstd1 zlib1g)
# The demo does without them (its cri and btrfs stay stand-ins), not
# without its kernel.
if ! fetch_debs extension-debs extension "${ext_pkgs[@]}"; then
  [ -n "$demo" ] || exit 1
  echo "extension packages could not be downloaded: the demo's cri and btrfs extensions stay stand-ins" >&2
fi
# Their arm64 builds, for the aarch64 extensions' boot (builder/
# boot_aarch64_test.go: testbase.Options.Extensions with aarch64).
if [ -z "$skip_arm64" ]; then
  deb_arch=arm64 fetch_debs extension-debs-arm64 "arm64 extension" "${ext_pkgs[@]}" || exit 1
fi

# The container images' test (cmd/builder/factory_image_test.go via
# pkgbase/testbase, Options.Images): xorriso and its libraries and the CA
# certificates of the factory's image, libc-bin for /etc/ld.so.conf,
# busybox-static and etcd-server for images of their own.
img_pkgs=(xorriso libisoburn1 libburn4 libisofs6 libjte2 libreadline8 libtinfo6 libacl1 libbz2-1.0 zlib1g
  libc6 libc-bin ca-certificates busybox-static etcd-server)
[ -n "$demo" ] || fetch_debs image-debs image "${img_pkgs[@]}"

if f=$(cached); then
  echo "kernel package cached: $f"
  exit 0
fi

download() { (cd "$tmp" && apt-get download -q "$1") >&2; }

# The pinned ABI first; when the archive dropped it, whatever
# linux-image-amd64 depends on today.
current() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-6\.1\.0-[0-9]+-amd64$/ { print $2; exit }'
}

ok=
for attempt in 1 2; do
  for pkg in "$pinned" $(current); do
    if download "$pkg"; then ok=$pkg; break 2; fi
  done
  [ "$attempt" = 1 ] && apt-get update -qq
done
if [ -z "$ok" ]; then
  echo "could not download a Debian kernel package into $dir" >&2
  exit 1
fi
debs=("$tmp"/*.deb)
mv "${debs[0]}" "$dir/"
echo "kernel package downloaded: $dir/$(basename "${debs[0]}")"
