package gpt

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

var ns = MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8") // RFC 9562's DNS namespace

func TestNameGUID(t *testing.T) {
	// RFC 9562 appendix A.4: uuid5(NAMESPACE_DNS, "www.example.com").
	if got := NameGUID(ns, "www.example.com").String(); got != "2ED6657D-E927-568B-95E1-2665A8AEA6A2" {
		t.Errorf("v5 uuid: %s", got)
	}
}

func disk(t *testing.T) (string, []Partition, GUID) {
	return diskFor(t, SectorSize, []int64{100 << 20, 1 << 20, 20 << 20, 1 << 20})
}

func diskFor(t *testing.T, sectorSize int, sizes []int64) (string, []Partition, GUID) {
	t.Helper()
	names := []string{"EFI", "BIOS", "BOOT", "META"}
	types := []GUID{TypeEFISystem, TypeBIOSBoot, TypeLinuxData, TypeLinuxData}
	var guids []GUID
	for _, n := range names {
		guids = append(guids, NameGUID(ns, "partition "+n))
	}
	parts, size, err := Layout(sectorSize, names, types, sizes, guids)
	if err != nil {
		t.Fatal(err)
	}
	img := make([]byte, size)
	dg := NameGUID(ns, "disk")
	if err := Write(sectorSize, img, dg, parts); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, parts, dg
}

// sfdisk and sgdisk are the judges: they read the table, both copies
// verify, and the GUIDs are the derived ones.
func TestJudges(t *testing.T) {
	sfdisk := testutil.NeedTool(t, "sfdisk")
	sgdisk := testutil.NeedTool(t, "sgdisk")
	p, parts, dg := disk(t)
	out, err := exec.Command(sfdisk, "--dump", p).CombinedOutput()
	if err != nil {
		t.Fatalf("sfdisk: %v\n%s", err, out)
	}
	dump := string(out)
	if !strings.Contains(dump, "label: gpt") || !strings.Contains(dump, "label-id: "+dg.String()) {
		t.Errorf("sfdisk --dump:\n%s", dump)
	}
	for _, pt := range parts {
		if !strings.Contains(dump, "uuid="+pt.GUID.String()) || !strings.Contains(dump, `name="`+pt.Name+`"`) || !strings.Contains(dump, "type="+pt.Type.String()) {
			t.Errorf("sfdisk --dump lacks %s:\n%s", pt.Name, dump)
		}
	}
	if out, err := exec.Command(sgdisk, "--verify", p).CombinedOutput(); err != nil || !strings.Contains(string(out), "No problems found") {
		t.Errorf("sgdisk --verify: %v\n%s", err, out)
	}
}

func TestErrors(t *testing.T) {
	img := make([]byte, 10<<20)
	g := NameGUID(ns, "x")
	for _, ps := range [][]Partition{
		{{Name: "a", Start: 10, Sectors: 100}},
		{{Name: "a", Start: 2048, Sectors: 1 << 30}},
		{{Name: "a", Start: 2048, Sectors: 100}, {Name: "b", Start: 2100, Sectors: 100}},
		{{Name: strings.Repeat("n", 37), Start: 2048, Sectors: 100}},
	} {
		if err := Write(SectorSize, img, g, ps); err == nil {
			t.Errorf("accepted %+v", ps)
		}
	}
}

// TestSectorSize4096: fdisk reading the disk with 4096-byte sectors (as a
// 4Kn drive or virtio-blk with logical_block_size=4096 shows it) finds
// both tables sound, the partitions where the 512-byte layout puts them
// (the same byte offsets), and the protective MBR counts 4096-byte sectors.
func TestSectorSize4096(t *testing.T) {
	fdisk := testutil.NeedTool(t, "fdisk")
	sizes := []int64{3 << 20, 1 << 20, 2<<20 + 1, 1 << 20}
	p, parts, dg := diskFor(t, 4096, sizes)
	parts512, _, _ := Layout(SectorSize, make([]string, 4), make([]GUID, 4), sizes, make([]GUID, 4))
	out, err := exec.Command(fdisk, "-b", "4096", "-l", "-o", "Device,Start,End,Type-UUID,Name,UUID", p).CombinedOutput()
	if err != nil {
		t.Fatalf("fdisk: %v\n%s", err, out)
	}
	list := string(out)
	if !strings.Contains(list, "Sector size (logical/physical): 4096 bytes") || !strings.Contains(list, "Disk identifier: "+dg.String()) ||
		strings.Contains(list, "corrupt") || strings.Contains(list, "mismatch") {
		t.Errorf("fdisk -b 4096 -l:\n%s", list)
	}
	for i, pt := range parts {
		if pt.Start*4096 != parts512[i].Start*512 || pt.Sectors*4096 != parts512[i].Sectors*512 {
			t.Errorf("%s: %d+%d sectors of 4096 bytes, %d+%d of 512", pt.Name, pt.Start, pt.Sectors, parts512[i].Start, parts512[i].Sectors)
		}
		line := fmt.Sprintf("%s%d %d %d %s %s %s", p, i+1, pt.Start, pt.Start+pt.Sectors-1, pt.Type, pt.Name, pt.GUID)
		if !strings.Contains(strings.Join(strings.Fields(list), " "), line) {
			t.Errorf("fdisk -b 4096 -l lacks %q:\n%s", line, list)
		}
	}
	img, _ := os.ReadFile(p)
	if got := binary.LittleEndian.Uint32(img[446+12:]); int(got) != len(img)/4096-1 {
		t.Errorf("protective MBR: %d sectors, want %d", got, len(img)/4096-1)
	}
	// The first usable sector follows the 4-sector entry array.
	if got := binary.LittleEndian.Uint64(img[4096+40:]); got != 6 {
		t.Errorf("first usable LBA %d, want 6", got)
	}
	for _, bad := range []int{0, 1000, 256, 1 << 17} {
		if _, _, err := Layout(bad, nil, nil, nil, nil); err == nil {
			t.Errorf("Layout(%d) accepted", bad)
		}
		if err := Write(bad, make([]byte, 1<<20), dg, nil); err == nil {
			t.Errorf("Write(%d) accepted", bad)
		}
	}
}
