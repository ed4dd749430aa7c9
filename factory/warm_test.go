package factory

import (
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/platform"
)

// TestWarmPlan: the default is every file of the platform's formats with
// the kernel, initramfs, command line and installer; kernel and initramfs
// are planned once for all platforms; a platform the release's spec adds
// is planned as Talos's are; a name that is no artifact, or a platform
// the release's table lacks, is refused naming it.
func TestWarmPlan(t *testing.T) {
	spec, err := platform.Talos.Override("", []platform.Platform{{Name: "mycloud", Formats: []string{"qcow2", "raw"}}})
	if err != nil {
		t.Fatal(err)
	}
	names := func(plan []warmTarget) string {
		var out []string
		for _, w := range plan {
			if w.a.kind == "installer" {
				out = append(out, InstallerRepo(w.a.platform))
				continue
			}
			out = append(out, w.a.FileName(w.arch))
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		table                platform.Table
		platforms, artifacts []string
		want                 string
	}{
		{platform.Talos, nil, nil, "kernel-x86_64 initramfs-x86_64.xz cmdline-metal-x86_64 metal-x86_64.iso metal-x86_64.raw metal-x86_64.qcow2 installer"},
		{platform.Talos, []string{"metal", "aws"}, []string{"kernel", "raw.xz", "installer"}, "kernel-x86_64 metal-x86_64.raw.xz installer aws-x86_64.raw.xz aws-installer"},
		{platform.Talos, []string{"gcp"}, nil, "kernel-x86_64 initramfs-x86_64.xz cmdline-gcp-x86_64 gcp-x86_64.raw.tar.gz gcp-installer"},
		{spec, []string{"mycloud"}, nil, "kernel-x86_64 initramfs-x86_64.xz cmdline-mycloud-x86_64 mycloud-x86_64.qcow2 mycloud-x86_64.raw mycloud-installer"},
	} {
		plan, err := warmPlan(c.table, []string{"x86_64"}, c.platforms, c.artifacts)
		if got := names(plan); err != nil || got != c.want {
			t.Errorf("%v %v: %s %v\nwant %s", c.platforms, c.artifacts, got, err, c.want)
		}
	}
	for _, c := range []struct {
		platforms, artifacts []string
		want                 string
	}{
		{nil, []string{"floppy"}, `"floppy"`},
		{nil, []string{"raw.tar.gz.xz"}, "not compressed further"},
		{[]string{"mars"}, nil, `"mars"`},
		{[]string{"mycloud"}, nil, `"mycloud"`}, // Talos's table
	} {
		if _, err := warmPlan(platform.Talos, []string{"x86_64"}, c.platforms, c.artifacts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v", c.platforms, c.artifacts, err)
		}
	}
}
