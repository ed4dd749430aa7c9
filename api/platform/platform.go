// Package platform lists the platforms boot media are made for: where a
// node runs (bare metal, a virtual machine, a cloud), the kernel
// arguments it needs there, and the disk formats that platform's importer
// takes. The names are the Image Factory's (and Talos's), so download
// URLs and scripts carry over.
package platform

import (
	"fmt"
	"slices"
	"strings"
)

// Platform is one place a node runs.
type Platform struct {
	Name string
	// Args are added to the image's kernel arguments (before the
	// schematic's own): the platform's name, which the node's init reads,
	// and its consoles.
	Args []string
	// Formats are the disk images made for it by default, as file name
	// suffixes: iso, raw, qcow2, vhd, raw.tar.gz.
	Formats []string
	// Description says where it is used, for --help and the factory's UI.
	Description string
}

// Formats every platform may be given, as file name suffixes.
var Formats = []string{"iso", "raw", "qcow2", "vhd", "raw.tar.gz"}

// All are the known platforms, in the order they are presented.
var All = []Platform{
	{Name: "metal", Args: []string{"nodeforge.platform=metal"}, Formats: []string{"iso", "raw", "qcow2"},
		Description: "bare metal: a USB stick or CD (ISO), a disk written with dd (raw), PXE"},
	{Name: "nocloud", Args: []string{"nodeforge.platform=nocloud", "console=tty1", "console=ttyS0"}, Formats: []string{"iso", "raw", "qcow2"},
		Description: "virtual machines configured by cloud-init's NoCloud source (Proxmox, libvirt, OpenStack without metadata)"},
	{Name: "aws", Args: []string{"nodeforge.platform=aws", "console=tty1", "console=ttyS0", "net.ifnames=0"}, Formats: []string{"raw"},
		Description: "Amazon EC2: a raw disk imported as a snapshot"},
	{Name: "azure", Args: []string{"nodeforge.platform=azure", "console=ttyS0,115200n8", "earlyprintk=ttyS0,115200", "rootdelay=300"}, Formats: []string{"vhd"},
		Description: "Microsoft Azure: a fixed VHD uploaded as a page blob"},
	{Name: "gcp", Args: []string{"nodeforge.platform=gcp", "console=ttyS0"}, Formats: []string{"raw.tar.gz"},
		Description: "Google Compute Engine: disk.raw in a gzipped tar, imported from a bucket"},
	{Name: "yandex", Args: []string{"nodeforge.platform=yandex", "console=ttyS0"}, Formats: []string{"qcow2"},
		Description: "Yandex Cloud: a qcow2 image uploaded to Object Storage"},
}

// Default is the platform of media made without naming one.
const Default = "metal"

// Lookup returns the named platform ("" is Default), or an error listing
// the known ones.
func Lookup(name string) (Platform, error) {
	if name == "" {
		name = Default
	}
	for _, p := range All {
		if p.Name == name {
			return p, nil
		}
	}
	return Platform{}, fmt.Errorf("unknown platform %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names are the known platforms' names.
func Names() []string {
	var n []string
	for _, p := range All {
		n = append(n, p.Name)
	}
	return n
}

// CheckFormat returns an error unless f is a known disk format.
func CheckFormat(f string) error {
	if !slices.Contains(Formats, f) {
		return fmt.Errorf("unknown disk format %q (known: %s)", f, strings.Join(Formats, ", "))
	}
	return nil
}
