package debext

// CRIDefinition and BtrfsDefinition place Debian's layout where the
// extension contract allows files (Talos's: /usr/local, the CRI's
// conf.d): relocation and link rules, the rest dropped. Debian's
// /etc/containerd/config.toml names /usr/lib/cni, which the relocation
// moves: the build refuses it, so it is dropped (the node init writes
// containerd's configuration). A spec's extensions-dir holding them
// replaces the shipped definitions of the same names.
const CRIDefinition = `# Debian's containerd, runc and CNI plugins as the cri extension.
name: cri
description: containerd, runc and CNI plugins (Debian's packages)
author: Nodeforge
compatibility: ">= v1.8.0"
packages: [containerd, runc, containernetworking-plugins]
version-from: containerd
relocate:
  - {from: /usr/bin/, to: /usr/local/bin/}
  - {from: /usr/sbin/, to: /usr/local/sbin/}
  - {from: /usr/lib/cni/, to: /usr/local/lib/cni/bin/}
drop:
  - /lib/systemd/**
  - /usr/share/**
  # It names /usr/lib/cni, where the plugins no longer are.
  - /etc/containerd/config.toml
  # Deprecated shims and plugins the node does not use.
  - /usr/bin/containerd-shim
  - /usr/bin/containerd-shim-runc-v1
  - /usr/lib/cni/dhcp
`

// BtrfsDefinition: Debian ships btrfs in /bin and mkfs.btrfs in /sbin;
// the links give the tools the other's name too, as usr-merged
// distributions find them in either.
const BtrfsDefinition = `# Debian's btrfs-progs as the btrfs extension.
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
`

// Definition is a definition's file in an extensions-dir.
type Definition struct {
	File, YAML string
}

// Definitions are the btrfs and cri definitions, in file name order.
func Definitions() []Definition {
	return []Definition{{"btrfs.yaml", BtrfsDefinition}, {"cri.yaml", CRIDefinition}}
}
