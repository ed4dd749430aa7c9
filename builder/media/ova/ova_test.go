package ova

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestOVAJudged: GNU tar lists the OVF descriptor first, then the manifest
// and the disk; the manifest's digests are the files'; the descriptor is
// well-formed XML whose file reference and disk capacity are the disk's;
// and qemu-img reads the disk as the raw image.
func TestOVAJudged(t *testing.T) {
	tarTool := testutil.NeedTool(t, "tar")
	qemuImg := testutil.NeedTool(t, "qemu-img")
	raw := make([]byte, 8<<20)
	copy(raw, "a boot sector, say")
	copy(raw[len(raw)-4096:], "a backup GPT header, say")
	var b bytes.Buffer
	if err := Write(&b, raw, Options{Name: "talos", ConfigKey: "talos.config", SourceDate: 1700000000}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ova := filepath.Join(dir, "vmware-amd64.ova")
	if err := os.WriteFile(ova, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tarTool, "-tvf", ova)
	cmd.Env = append(os.Environ(), "TZ=UTC") // tar lists times in local time
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 3 || !strings.HasSuffix(lines[0], " disk.ovf") || !strings.HasSuffix(lines[1], " disk.mf") || !strings.HasSuffix(lines[2], " disk.vmdk") ||
		!strings.Contains(lines[0], "2023-11-14 22:13") {
		t.Fatalf("tar -tvf: %v\n%s", err, out)
	}
	x := filepath.Join(dir, "x")
	os.Mkdir(x, 0o755)
	if out, err := exec.Command(tarTool, "-xf", ova, "-C", x).CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	rawPath := filepath.Join(dir, "disk.raw")
	os.WriteFile(rawPath, raw, 0o644)
	if out, err := exec.Command(qemuImg, "compare", "-f", "raw", "-F", "vmdk", rawPath, filepath.Join(x, VMDKName)).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img compare: %v\n%s", err, out)
	}
	read := func(n string) []byte {
		d, err := os.ReadFile(filepath.Join(x, n))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ovf, mf, disk := read(OVFName), read(MFName), read(VMDKName)
	if want := fmt.Sprintf("SHA256(disk.ovf)= %x\nSHA256(disk.vmdk)= %x\n", sha256.Sum256(ovf), sha256.Sum256(disk)); string(mf) != want {
		t.Errorf("manifest:\n%s\nwant\n%s", mf, want)
	}
	// The descriptor read back by an XML decoder, namespaces resolved.
	const ns = "http://schemas.dmtf.org/ovf/envelope/1"
	var env struct {
		XMLName xml.Name
		Files   []struct {
			Href string `xml:"http://schemas.dmtf.org/ovf/envelope/1 href,attr"`
			Size int64  `xml:"http://schemas.dmtf.org/ovf/envelope/1 size,attr"`
		} `xml:"http://schemas.dmtf.org/ovf/envelope/1 References>File"`
		Disk struct {
			Capacity int64  `xml:"http://schemas.dmtf.org/ovf/envelope/1 capacity,attr"`
			FileRef  string `xml:"http://schemas.dmtf.org/ovf/envelope/1 fileRef,attr"`
		} `xml:"http://schemas.dmtf.org/ovf/envelope/1 DiskSection>Disk"`
		Hardware struct {
			Items []struct {
				Type string `xml:"http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData ResourceType"`
				Host string `xml:"http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData HostResource"`
			} `xml:"http://schemas.dmtf.org/ovf/envelope/1 Item"`
			Config vmwConfigXML `xml:"http://www.vmware.com/schema/ovf Config"`
		} `xml:"http://schemas.dmtf.org/ovf/envelope/1 VirtualSystem>VirtualHardwareSection"`
		Property struct {
			Key string `xml:"http://schemas.dmtf.org/ovf/envelope/1 key,attr"`
		} `xml:"http://schemas.dmtf.org/ovf/envelope/1 VirtualSystem>ProductSection>Property"`
	}
	dec := xml.NewDecoder(bytes.NewReader(ovf))
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("the descriptor is not XML: %v\n%s", err, ovf)
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if cd, ok := tok.(xml.CharData); err != nil || !ok || strings.TrimSpace(string(cd)) != "" {
			t.Errorf("more after the envelope: %v %v", tok, err)
			break
		}
	}
	if env.XMLName != (xml.Name{Space: ns, Local: "Envelope"}) || len(env.Files) != 1 || env.Files[0].Href != VMDKName || env.Files[0].Size != int64(len(disk)) ||
		env.Disk.Capacity != int64(len(raw)) || env.Disk.FileRef != "file1" || len(env.Hardware.Items) != 5 || env.Hardware.Items[3].Type != "17" || env.Hardware.Items[3].Host != "ovf:/disk/vmdisk1" ||
		env.Hardware.Config != (vmwConfigXML{"firmware", "efi"}) || env.Property.Key != "talos.config" {
		t.Errorf("descriptor: %+v\n%s", env, ovf)
	}
	// USTAR, owners 0, the source date: the same bytes every time.
	tr := tar.NewReader(bytes.NewReader(b.Bytes()))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil || h.Uid != 0 || h.Gid != 0 || h.Format != tar.FormatUSTAR || h.ModTime.Unix() != 1700000000 {
			t.Errorf("%+v %v", h, err)
			break
		}
	}
	var again bytes.Buffer
	if err := Write(&again, raw, Options{Name: "talos", ConfigKey: "talos.config", SourceDate: 1700000000}); err != nil || !bytes.Equal(again.Bytes(), b.Bytes()) {
		t.Errorf("not the same bytes twice: %v", err)
	}
}

type vmwConfigXML struct {
	Key   string `xml:"http://www.vmware.com/schema/ovf key,attr"`
	Value string `xml:"http://www.vmware.com/schema/ovf value,attr"`
}
