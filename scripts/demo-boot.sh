#!/usr/bin/env bash
# Boots a node of the demo release under qemu (TCG) with Debian's OVMF
# UEFI firmware, the node's serial console on this terminal, until the
# node powers off (make demo-boot). Usage:
#   scripts/demo-boot.sh DEMO_DIR [ISO [SCHEMATIC]]
# ISO: boot that file (an ISO the Image Factory served, say). Otherwise the
# ISO is made from the demo release in DEMO_DIR (make demo) for SCHEMATIC
# (a schematic file; default: none, the plain node) with builder image
# --release, byte for byte what the factory serves for it, into
# DEMO_DIR/boot-media/media/<schematic id>/metal-x86_64.iso.
# When the demo's cri and btrfs extensions are Debian's packages (make demo
# with them cached), the node gets two more virtio disks, which its init
# finds by serial number: the demo release's own container image hello
# (the spec's images section: the nodeforge-init package, run as
# "init hello"), verified against the release's signatures and exported
# from its OCI layout by builder image --release --kind container into
# DEMO_DIR/boot-media/images/hello.tar (an OCI archive, read-only, serial
# nodeforge-images), and a blank 256 MB scratch disk (serial
# nodeforge-scratch, the only disk the init formats). A node with the cri
# extension then imports the image with ctr, runs it by the name the archive
# gives it with containerd and runc and prints "container printed: ...";
# one with btrfs formats the scratch disk with
# mkfs.btrfs and mounts it ("btrfs mounted"): this script fails when a
# stacked extension that is not a stand-in did not get that far.
# Needs qemu-system-x86_64 and /usr/share/OVMF (Debian: qemu-system-x86, ovmf).
set -euo pipefail

demo=${1:?usage: $0 DEMO_DIR [ISO [SCHEMATIC]]}
iso=${2:-}
schematic=${3:-}
bin=${BIN:-bin/builder}
version=1.11.0-demo
code=/usr/share/OVMF/OVMF_CODE_4M.fd
vars_src=/usr/share/OVMF/OVMF_VARS_4M.fd

qemu=$(command -v qemu-system-x86_64) || { echo "demo-boot: qemu-system-x86_64 is needed (Debian: apt-get install qemu-system-x86)" >&2; exit 1; }
for f in "$code" "$vars_src"; do
  [ -f "$f" ] || { echo "demo-boot: $f is needed: the UEFI firmware (Debian: apt-get install ovmf)" >&2; exit 1; }
done

if [ -z "$iso" ]; then
  [ -d "$demo/release/dev" ] || { echo "demo-boot: no demo release in $demo/release/dev: run make demo first" >&2; exit 1; }
  if grep -q '^make demo: STAND-IN media' "$demo/media.txt" 2>/dev/null; then
    echo "demo-boot: the demo in $demo was made with STAND-IN media, which do not boot: $(cat "$demo/media.txt")" >&2
    exit 1
  fi
  if [ -z "$schematic" ]; then
    schematic=$demo/schematic.yaml
    printf 'customization: {}\n' >"$schematic"
  fi
  "$bin" image --release "oci:$demo/release/dev" --version "$version" --key "$demo/keys/dev/cosign.pub" \
    --schematic "$schematic" --kind iso --compress '' --out "$demo/boot-media" >"$demo/image.log"
  id=$("$bin" schematic id "$schematic")
  iso=$demo/boot-media/media/$id/metal-x86_64.iso
fi
[ -f "$iso" ] || { echo "demo-boot: no ISO at $iso" >&2; exit 1; }

vars=$(mktemp "${TMPDIR:-/tmp}/nodeforge-ovmf-vars-XXXXXX.fd")
console=$(mktemp "${TMPDIR:-/tmp}/nodeforge-console-XXXXXX.log")
scratch=$(mktemp "${TMPDIR:-/tmp}/nodeforge-scratch-XXXXXX.img")
trap 'rm -f "$vars" "$console" "$scratch"' EXIT
cp "$vars_src" "$vars"
disks=()
if grep -q "cri and btrfs: Debian's" "$demo/media.txt" 2>/dev/null; then
  image=$demo/boot-media/images/hello.tar
  "$bin" image --release "oci:$demo/release/dev" --version "$version" --key "$demo/keys/dev/cosign.pub" \
    --kind container --name hello --out "$demo/boot-media" >"$demo/image-hello.log"
  truncate -s 256M "$scratch"
  disks=(-drive "if=none,id=images,format=raw,readonly=on,file=$image"
    -device virtio-blk-pci,drive=images,serial=nodeforge-images
    -drive "if=none,id=scratch,format=raw,file=$scratch"
    -device virtio-blk-pci,drive=scratch,serial=nodeforge-scratch)
fi
limit=${DEMO_BOOT_TIMEOUT:-600}
echo "demo-boot: booting $iso under qemu (TCG, UEFI: OVMF); the node's console follows and the node powers off by itself (Ctrl-A X quits qemu; given up after ${limit} s)"
start=$(date +%s)
timeout --foreground "$limit" "$qemu" -accel tcg -cpu max -m 1024 -smp 1 \
  -drive "if=pflash,format=raw,unit=0,readonly=on,file=$code" \
  -drive "if=pflash,format=raw,unit=1,file=$vars" \
  -cdrom "$iso" "${disks[@]}" -nographic -no-reboot -nic none | tee "$console" || true
took=$(( $(date +%s) - start ))
# The node init's last word: OK, or FAIL with the reason (or nothing, when
# the firmware, the boot manager or the kernel stopped first).
if ! grep -q 'NODEFORGE-BOOT-OK' "$console"; then
  echo "demo-boot: the node did not report NODEFORGE-BOOT-OK (after $took s): see its console above" >&2
  exit 1
fi
# What the stacked cri and btrfs extensions did: the banner lists them
# ("extensions  btrfs 6.2, cri 1.6.20"); a stand-in's says it is one.
stacked=$(tr -d '\r' <"$console" | sed -n 's/^nodeforge-init:   extensions  //p' | head -n 1)
did=
for ext in cri btrfs; do
  case ", $stacked" in *", $ext "*) ;; *) continue ;; esac
  if grep -q "^nodeforge-init: $ext: .* is a stand-in" "$console"; then
    did="$did; $ext: a stand-in, nothing started"
    continue
  fi
  case $ext in
  cri) marker='nodeforge-init: container printed: ' what='ran a container' ;;
  btrfs) marker='nodeforge-init: \[btrfs 3/4\] btrfs mounted' what='mounted btrfs' ;;
  esac
  if ! grep -q "$marker" "$console"; then
    echo "demo-boot: the node has the $ext extension but did not show \"$marker\" (after $took s): see its console above" >&2
    exit 1
  fi
  did="$did; $ext: $what"
done
echo "demo-boot: the node booted and powered off after $took s$did"
