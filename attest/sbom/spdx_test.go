package sbom

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func doc() Document {
	return Document{Name: "demo-1.0-x86_64", Version: "1.0", Branch: "p11", Vendor: "altlinux", Tool: "nodeforge-builder-test",
		LockSHA256: "abc", SourceDateEpoch: 1700000000, Packages: []Package{
			{Name: "zlib", Version: "1.3", Release: "alt1", Arch: "x86_64", NEVRA: "zlib-1.3-alt1.x86_64", SourceRPM: "zlib-1.3-alt1.src.rpm", License: "Zlib", SHA256: "0ea55c28f8014d8886b6248fe3da5d588f55c0823847a6b4579f1131b051b5e2"},
			{Name: "kernel-image-std-def", Epoch: "2", Version: "6.12.40", Release: "alt1", Arch: "x86_64", NEVRA: "kernel-image-std-def-2:6.12.40-alt1.x86_64", License: "GPLv2"},
		}}
}

func TestSPDX(t *testing.T) {
	a, err := SPDX(doc())
	if err != nil {
		t.Fatal(err)
	}
	d := doc()
	d.Packages[0], d.Packages[1] = d.Packages[1], d.Packages[0]
	b, _ := SPDX(d)
	if !bytes.Equal(a, b) {
		t.Error("the document depends on the package order")
	}
	var got map[string]any
	if err := json.Unmarshal(a, &got); err != nil {
		t.Fatal(err)
	}
	if got["spdxVersion"] != "SPDX-2.3" || got["creationInfo"].(map[string]any)["created"] != "2023-11-14T22:13:20Z" {
		t.Errorf("header: %v", got)
	}
	if n := len(got["packages"].([]any)); n != 3 {
		t.Errorf("%d packages, want the artifact and 2", n)
	}
	for _, want := range []string{
		`"referenceLocator": "pkg:rpm/altlinux/zlib@1.3-alt1?arch=x86_64\u0026distro=p11"`,
		`"referenceLocator": "pkg:rpm/altlinux/kernel-image-std-def@6.12.40-alt1?arch=x86_64\u0026distro=p11\u0026epoch=2"`,
		`"SPDXID": "SPDXRef-Package-kernel-image-std-def-2-6.12.40-alt1.x86-64"`,
		`"checksumValue": "0ea55c28f8014d8886b6248fe3da5d588f55c0823847a6b4579f1131b051b5e2"`,
		`"relationshipType": "CONTAINS"`,
	} {
		if !strings.Contains(string(a), want) {
			t.Errorf("document lacks %s", want)
		}
	}
}

func TestCycloneDX(t *testing.T) {
	a, err := CycloneDX(doc())
	if err != nil {
		t.Fatal(err)
	}
	d := doc()
	d.Packages[0], d.Packages[1] = d.Packages[1], d.Packages[0]
	b, _ := CycloneDX(d)
	if !bytes.Equal(a, b) {
		t.Error("the document depends on the package order")
	}
	var got struct {
		BOMFormat, SpecVersion, SerialNumber string
		Metadata                             struct{ Timestamp string }
		Components                           []struct{ Purl, Version string }
		Dependencies                         []struct{ DependsOn []string }
	}
	if err := json.Unmarshal(a, &got); err != nil {
		t.Fatal(err)
	}
	if got.BOMFormat != "CycloneDX" || got.SpecVersion != "1.5" || got.Metadata.Timestamp != "2023-11-14T22:13:20Z" ||
		!strings.HasPrefix(got.SerialNumber, "urn:uuid:") || len(got.SerialNumber) != 45 {
		t.Errorf("header: %+v", got)
	}
	if len(got.Components) != 2 || got.Components[0].Version != "2:6.12.40-alt1" || len(got.Dependencies[0].DependsOn) != 2 {
		t.Errorf("components: %+v", got.Components)
	}
	d2 := doc()
	d2.LockSHA256 = "other"
	c, _ := CycloneDX(d2)
	if bytes.Equal(a, c) {
		t.Error("another release gives the same serial number")
	}
}
