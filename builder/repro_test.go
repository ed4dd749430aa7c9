package builder

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/report"
)

// TestReproduceRunsVariants: the experiment asks its runner for each
// build with the variant's directories and environment (the inherited
// TZ, LANG and HOME dropped), names what it varied, and reports an
// artifact that differs with the compressor each report says wrote it.
func TestReproduceRunsVariants(t *testing.T) {
	other := &Builder{Path: "/opt/builder-arm64", Arch: "arm64", Emulator: "/usr/bin/qemu-aarch64-static", Cgo: "cgo", GoVersion: "go1.26.8"}
	variants := []ReproVariant{
		{TZ: "UTC", Lang: "C", Umask: "022", Procs: 1},
		{TZ: "Asia/Kathmandu", Lang: "ru_RU.UTF-8", Umask: "077", Procs: 5, Shuffle: 7, Builder: other},
	}
	zstd := map[string]string{"squashfs zstd": "github.com/DataDog/zstd@v1.5.7"}
	var seen []ReproBuild
	run := func(_ context.Context, b ReproBuild) error {
		seen = append(seen, b)
		os.MkdirAll(filepath.Join(b.Out, "x86_64"), 0o755)
		os.WriteFile(filepath.Join(b.Out, "x86_64", "rootfs.sqsh"), []byte{byte(b.Index)}, 0o644)
		os.WriteFile(filepath.Join(b.Out, "x86_64", "cmdline"), []byte("same"), 0o644)
		j, _ := json.Marshal(&report.Report{Compressors: zstd, Tools: map[string]string{"squashfs": "rootfs/sqfs (zstd level 19)"}})
		return os.WriteFile(filepath.Join(b.Out, "report.json"), j, 0o644)
	}
	res, err := Reproduce(context.Background(), ReproOptions{Env: []string{"TZ=Europe/Paris", "HOME=/root", "KEEP=1"}, Root: t.TempDir(), Variants: variants, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[1].Variant.Builder != other || !strings.HasSuffix(seen[1].Dir, "build-2") {
		t.Fatalf("builds asked for: %+v", seen)
	}
	env := seen[1].Env
	if !slices.Contains(env, "KEEP=1") || slices.Contains(env, "TZ=Europe/Paris") || !slices.Contains(env, "TZ=Asia/Kathmandu") || !slices.Contains(env, "HOME="+seen[1].Home) {
		t.Errorf("environment of build 2: %v", env)
	}
	for _, want := range []string{"TZ: UTC, Asia/Kathmandu", "umask: 022, 077", "package order: as locked, shuffled (seed 7)",
		"builder: this builder (linux/", "/opt/builder-arm64 (linux/arm64 via qemu-aarch64-static, cgo, go1.26.8)"} {
		if !strings.Contains(strings.Join(res.Variations, "\n"), want) {
			t.Errorf("variations do not say %q: %q", want, res.Variations)
		}
	}
	if len(res.Diffs) != 1 || res.Diffs[0].Artifact != "x86_64/rootfs.sqsh" ||
		!slices.Equal(res.Diffs[0].WrittenBy, []string{"squashfs zstd: github.com/DataDog/zstd@v1.5.7", "squashfs zstd: github.com/DataDog/zstd@v1.5.7"}) {
		t.Errorf("differences: %+v", res.Diffs)
	}
	for name, want := range map[string]string{"x86_64/initramfs.xz": "initramfs xz", "media/x/metal-x86_64.raw.zst": "initramfs zstd",
		"media/x/metal-x86_64.raw.gz": "layers gzip", "media/x/metal-x86_64.raw.xz": "disk xz", "media/x/initramfs-x86_64.xz": "initramfs xz", "x86_64/cmdline": "", "x86_64/rootfs.sqsh": "squashfs xz"} {
		if got := compressorOf(name, "tar2sqfs (xz level 6)"); got != want {
			t.Errorf("compressorOf(%s) = %q, want %q", name, got, want)
		}
	}
}
