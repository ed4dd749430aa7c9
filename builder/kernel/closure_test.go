package kernel

import (
	"slices"
	"strings"
	"testing"
)

func TestClosureMatchesModprobe(t *testing.T) {
	c := compressedCase(t)
	kver := c.in.KernelVersion
	deps, err := ParseModulesDep(c.ours["modules.dep"])
	if err != nil {
		t.Fatal(err)
	}
	// In the order the test rig boots them (docs/test-rig.md).
	wanted := []string{"virtio_pci", "virtio_blk", "loop", "squashfs", "overlay"}
	var union []string
	for _, name := range wanted {
		var want []string
		for _, line := range strings.Split(showDepends(t, c.theirRoot, kver, name), "\n") {
			if rel, ok := moduleRel(line, kver); ok {
				want = append(want, rel)
			}
		}
		got, err := Closure(deps, []string{name})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("Closure(%s) = %q, modprobe --show-depends loads %q", name, got, want)
		}
		for _, p := range want {
			if !slices.Contains(union, p) {
				union = append(union, p)
			}
		}
	}
	got, err := Closure(deps, wanted)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, union) {
		t.Errorf("Closure(all) = %q, want %q", got, union)
	}
	// Dependencies come first: virtio_ring, virtio, then the transports.
	pos := func(name string) int {
		return slices.IndexFunc(got, func(p string) bool { return ModuleName(p) == name })
	}
	order := []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci", "virtio_blk", "loop", "squashfs", "overlay"}
	for i := 1; i < len(order); i++ {
		if pos(order[i-1]) < 0 || pos(order[i-1]) > pos(order[i]) {
			t.Errorf("%s is not loaded before %s: %q", order[i-1], order[i], got)
		}
	}
}

func TestClosureSynthetic(t *testing.T) {
	deps := map[string][]string{
		"kernel/a/dm-mod.ko":       {},
		"kernel/a/dm-verity.ko.xz": {"kernel/a/dm-bufio.ko", "kernel/a/dm-mod.ko"},
		"kernel/a/dm-bufio.ko":     {},
		"kernel/b/x.ko":            {"kernel/a/dm-verity.ko.xz", "kernel/a/dm-bufio.ko", "kernel/a/dm-mod.ko"},
	}
	for _, tc := range []struct {
		want []string
		got  []string
	}{
		{[]string{"dm_verity"}, []string{"kernel/a/dm-mod.ko", "kernel/a/dm-bufio.ko", "kernel/a/dm-verity.ko.xz"}},
		{[]string{"dm-verity", "dm_mod"}, []string{"kernel/a/dm-mod.ko", "kernel/a/dm-bufio.ko", "kernel/a/dm-verity.ko.xz"}},
		{[]string{"kernel/b/x.ko"}, []string{"kernel/a/dm-mod.ko", "kernel/a/dm-bufio.ko", "kernel/a/dm-verity.ko.xz", "kernel/b/x.ko"}},
		{nil, nil},
	} {
		got, err := Closure(deps, tc.want)
		if err != nil || !slices.Equal(got, tc.got) {
			t.Errorf("Closure(%q) = %q, %v; want %q", tc.want, got, err, tc.got)
		}
	}
	for _, bad := range []string{"nosuch", "kernel/c/dm-mod.ko", ""} {
		if _, err := Closure(deps, []string{bad}); err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("Closure(%q): err = %v, want a missing-module error", bad, err)
		}
	}
	// A dependency missing from the map, and a cycle.
	if _, err := Closure(map[string][]string{"a.ko": {"b.ko"}}, []string{"a"}); err == nil || !strings.Contains(err.Error(), "b.ko") {
		t.Errorf("missing dependency: err = %v", err)
	}
	if _, err := Closure(map[string][]string{"a.ko": {"b.ko"}, "b.ko": {"a.ko"}}, []string{"a"}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: err = %v", err)
	}
}

func TestModulePathsAndNames(t *testing.T) {
	paths := ModulePaths(map[string][]string{"kernel/drivers/md/dm-verity.ko.zst": nil, "extra/zfs.ko": nil})
	if paths["dm_verity"] != "kernel/drivers/md/dm-verity.ko.zst" || paths["zfs"] != "extra/zfs.ko" || len(paths) != 2 {
		t.Errorf("ModulePaths = %v", paths)
	}
	for in, want := range map[string]string{"dm-verity": "dm_verity", "a/b/virtio_blk.ko.xz": "virtio_blk", "x.y.ko": "x", "": ""} {
		if got := ModuleName(in); got != want {
			t.Errorf("ModuleName(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := ParseModulesDep([]byte("a.ko:\nbroken line\n")); err == nil {
		t.Error("ParseModulesDep accepted a line without ':'")
	}
}
