// Package ova packs a virtual appliance for VMware (vSphere, ESXi,
// Workstation, ovftool) as the OVF standard (DMTF DSP0243) lays one out:
// a USTAR archive of the OVF descriptor first (disk.ovf), its manifest
// (disk.mf, the SHA-256 of the other files) and the disk, a
// streamOptimized VMDK (disk.vmdk), the names Talos's images use. The
// machine boots with UEFI firmware (the disk has no BIOS boot loader), and
// its configuration comes through VMware's guestinfo: the descriptor
// offers it as a property. Nothing depends on the clock or the host.
package ova

import (
	"archive/tar"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nodeforge/builder/builder/media/vmdk"
	"github.com/nodeforge/builder/internal/digest"
)

// The appliance's files, in archive order.
const (
	OVFName  = "disk.ovf"
	MFName   = "disk.mf"
	VMDKName = "disk.vmdk"
)

// Options describe the appliance.
type Options struct {
	// Name is the virtual machine's.
	Name string
	// ConfigKey is the guestinfo key the node reads its configuration
	// from (talos.config), offered as a property to fill in.
	ConfigKey string
	// SourceDate is the files' time (seconds since 1970).
	SourceDate int64
}

// Write writes raw as an OVA to w.
func Write(w io.Writer, raw []byte, o Options) error {
	var disk bytes.Buffer
	if err := vmdk.Write(&disk, raw, VMDKName); err != nil {
		return err
	}
	ovf, err := Descriptor(int64(disk.Len()), int64(len(raw)), o)
	if err != nil {
		return err
	}
	mf := fmt.Sprintf("SHA256(%s)= %s\nSHA256(%s)= %s\n", OVFName, digest.SHA256Hex(ovf), VMDKName, digest.SHA256Hex(disk.Bytes()))
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
	}{{OVFName, ovf}, {MFName, []byte(mf)}, {VMDKName, disk.Bytes()}} {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)),
			ModTime: time.Unix(o.SourceDate, 0).UTC(), Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("ova: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Descriptor is the OVF descriptor of an appliance whose disk file is
// fileSize bytes and holds a disk of capacity bytes: one virtual machine
// with 2 CPUs, 2 GiB of memory, the disk on a paravirtual SCSI controller,
// a VMXNET3 adapter on "VM Network", UEFI firmware, and the configuration
// property for the guestinfo transport.
func Descriptor(fileSize, capacity int64, o Options) ([]byte, error) {
	dev := func(id int, typ int, name string, fields ...rasd) item {
		return item{InstanceID: id, ResourceType: typ, ElementName: name, fields: fields}
	}
	env := envelope{XMLNS: nsOVF, NSOVF: nsOVF, NSRASD: nsRASD, NSVSSD: nsVSSD, NSVMW: nsVMW,
		References: []file{{Href: VMDKName, ID: "file1", Size: fileSize}},
		Disk: diskSection{Info: "Virtual disk information", Disks: []disk{{Capacity: capacity, DiskID: "vmdisk1", FileRef: "file1",
			Format: "http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"}}},
		Network: networkSection{Info: "The list of logical networks", Networks: []network{{Name: "VM Network", Description: "The VM Network network"}}},
		System: virtualSystem{ID: o.Name, Info: "A virtual machine", Name: o.Name,
			Product: productSection{Required: false, Info: "Configuration", Properties: []property{{Key: o.ConfigKey, Type: "string",
				UserConfigurable: true, Label: "Machine configuration", Description: "The node's configuration, inline (guestinfo." + o.ConfigKey + ")"}}},
			OS: osSection{ID: 101, OSType: "other3xLinux64Guest", Info: "The kind of installed guest operating system"},
			Hardware: hardwareSection{Transport: "com.vmware.guestInfo", Info: "Virtual hardware requirements",
				System: vsSystem{ElementName: "Virtual Hardware Family", InstanceID: 0, Identifier: o.Name, Type: "vmx-15"},
				Items: []item{
					dev(1, 3, "2 virtual CPU(s)", rasd{"AllocationUnits", "hertz * 10^6"}, rasd{"Description", "Number of Virtual CPUs"}, rasd{"VirtualQuantity", "2"}),
					dev(2, 4, "2048MB of memory", rasd{"AllocationUnits", "byte * 2^20"}, rasd{"Description", "Memory Size"}, rasd{"VirtualQuantity", "2048"}),
					dev(3, 6, "scsiController0", rasd{"Address", "0"}, rasd{"Description", "SCSI Controller"}, rasd{"ResourceSubType", "VirtualSCSI"}),
					dev(4, 17, "disk0", rasd{"AddressOnParent", "0"}, rasd{"HostResource", "ovf:/disk/vmdisk1"}, rasd{"Parent", "3"}),
					dev(5, 10, "ethernet0", rasd{"AddressOnParent", "2"}, rasd{"AutomaticAllocation", "true"}, rasd{"Connection", "VM Network"},
						rasd{"Description", `VmxNet3 ethernet adapter on "VM Network"`}, rasd{"ResourceSubType", "VmxNet3"}),
				},
				Config: []vmwConfig{{Required: false, Key: "firmware", Value: "efi"}},
				Extra:  []vmwConfig{{Required: false, Key: "disk.EnableUUID", Value: "true"}},
			}},
	}
	b, err := xml.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("ova: %w", err)
	}
	return append(append([]byte(xml.Header), b...), '\n'), nil
}

// The descriptor's elements, in the order the OVF schema wants them.
// Names are written with the prefixes the envelope declares.

// The namespaces the envelope declares: OVF's (also the default), the
// resource and system settings' (rasd:, vssd:) and VMware's (vmw:).
const (
	nsOVF  = "http://schemas.dmtf.org/ovf/envelope/1"
	nsRASD = "http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData"
	nsVSSD = "http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData"
	nsVMW  = "http://www.vmware.com/schema/ovf"
)

type envelope struct {
	XMLName    xml.Name       `xml:"Envelope"`
	XMLNS      string         `xml:"xmlns,attr"`
	NSOVF      string         `xml:"xmlns:ovf,attr"`
	NSRASD     string         `xml:"xmlns:rasd,attr"`
	NSVSSD     string         `xml:"xmlns:vssd,attr"`
	NSVMW      string         `xml:"xmlns:vmw,attr"`
	References []file         `xml:"References>File"`
	Disk       diskSection    `xml:"DiskSection"`
	Network    networkSection `xml:"NetworkSection"`
	System     virtualSystem  `xml:"VirtualSystem"`
}

type file struct {
	Href string `xml:"ovf:href,attr"`
	ID   string `xml:"ovf:id,attr"`
	Size int64  `xml:"ovf:size,attr"`
}

type diskSection struct {
	Info  string `xml:"Info"`
	Disks []disk `xml:"Disk"`
}

type disk struct {
	Capacity int64  `xml:"ovf:capacity,attr"`
	DiskID   string `xml:"ovf:diskId,attr"`
	FileRef  string `xml:"ovf:fileRef,attr"`
	Format   string `xml:"ovf:format,attr"`
}

type networkSection struct {
	Info     string    `xml:"Info"`
	Networks []network `xml:"Network"`
}

type network struct {
	Name        string `xml:"ovf:name,attr"`
	Description string `xml:"Description"`
}

type virtualSystem struct {
	ID       string          `xml:"ovf:id,attr"`
	Info     string          `xml:"Info"`
	Name     string          `xml:"Name"`
	Product  productSection  `xml:"ProductSection"`
	OS       osSection       `xml:"OperatingSystemSection"`
	Hardware hardwareSection `xml:"VirtualHardwareSection"`
}

type productSection struct {
	Required   bool       `xml:"ovf:required,attr"`
	Info       string     `xml:"Info"`
	Properties []property `xml:"Property"`
}

type property struct {
	Key              string `xml:"ovf:key,attr"`
	Type             string `xml:"ovf:type,attr"`
	UserConfigurable bool   `xml:"ovf:userConfigurable,attr"`
	Value            string `xml:"ovf:value,attr"`
	Label            string `xml:"Label"`
	Description      string `xml:"Description"`
}

type osSection struct {
	ID     int    `xml:"ovf:id,attr"`
	OSType string `xml:"vmw:osType,attr"`
	Info   string `xml:"Info"`
}

type hardwareSection struct {
	Transport string      `xml:"ovf:transport,attr"`
	Info      string      `xml:"Info"`
	System    vsSystem    `xml:"System"`
	Items     []item      `xml:"Item"`
	Config    []vmwConfig `xml:"vmw:Config"`
	Extra     []vmwConfig `xml:"vmw:ExtraConfig"`
}

type vsSystem struct {
	ElementName string `xml:"vssd:ElementName"`
	InstanceID  int    `xml:"vssd:InstanceID"`
	Identifier  string `xml:"vssd:VirtualSystemIdentifier"`
	Type        string `xml:"vssd:VirtualSystemType"`
}

// item is a virtual device: its rasd: fields in the schema's (alphabetical)
// order.
type item struct {
	InstanceID, ResourceType int
	ElementName              string
	fields                   []rasd
}

type rasd struct{ name, value string }

func (it item) MarshalXML(enc *xml.Encoder, start xml.StartElement) error {
	all := append([]rasd{{"ElementName", it.ElementName}, {"InstanceID", fmt.Sprint(it.InstanceID)},
		{"ResourceType", fmt.Sprint(it.ResourceType)}}, it.fields...)
	slices.SortFunc(all, func(a, b rasd) int { return strings.Compare(a.name, b.name) })
	if err := enc.EncodeToken(start); err != nil {
		return err
	}
	for _, f := range all {
		if err := enc.EncodeElement(f.value, xml.StartElement{Name: xml.Name{Local: "rasd:" + f.name}}); err != nil {
			return err
		}
	}
	return enc.EncodeToken(start.End())
}

type vmwConfig struct {
	Required bool   `xml:"ovf:required,attr"`
	Key      string `xml:"vmw:key,attr"`
	Value    string `xml:"vmw:value,attr"`
}
