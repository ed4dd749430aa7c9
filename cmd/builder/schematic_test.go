package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSchematicID(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	os.WriteFile(a, []byte("customization:\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n"), 0o644)
	os.WriteFile(b, []byte(`{"customization": {"systemExtensions": {"officialExtensions": ["cri", "zfs"]}}}`), 0o644)
	ida, err := runBuilder(t, "schematic", "id", a)
	if err != nil {
		t.Fatal(err)
	}
	idb, err := runBuilder(t, "schematic", "id", b)
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's IDs: the order listed is part of the schematic.
	if ida == idb || strings.TrimSpace(idb) != "31bf9672f88eb294d092fdb742131ca78bb6b931d0bcc16dba8467a0a0092c86" {
		t.Errorf("ids %q and %q", ida, idb)
	}
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, []byte("customization: {}\n"), 0o644)
	if id, _ := runBuilder(t, "schematic", "id", empty); strings.TrimSpace(id) != "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba" {
		t.Errorf("empty schematic: %q", id)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("customization: {extensions: [zfs]}\n"), 0o644)
	if _, err := runBuilder(t, "schematic", "id", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("bad schematic: %v", err)
	}
}
