package extensions

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestShippedDefinitions(t *testing.T) {
	set, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), " "); got != "btrfs cri nvidia zfs" {
		t.Fatalf("shipped: %s", got)
	}
	for _, name := range set.Names() {
		if set[name].Descriptions["ru"] == "" {
			t.Errorf("%s has no description in Russian", name)
		}
	}
	zfs := set["zfs"]
	if got := strings.Join(zfs.PackagesFor("std-def"), " "); got != "kernel-modules-zfs-std-def zfs-utils" {
		t.Errorf("zfs packages: %s", got)
	}
	for in, want := range map[string]string{
		"/lib/modules/6.12.40-std-def-alt1/misc/zfs.ko": "/usr/lib/modules/6.12.40-std-def-alt1/misc/zfs.ko",
		"/sbin/zpool":           "/usr/local/sbin/zpool",
		"/lib64/libzfs.so.4":    "/usr/local/lib64/libzfs.so.4",
		"/lib/modules":          "/usr/lib/modules",
		"/etc/zfs/zed.d/zed.rc": "/usr/local/etc/zfs/zed.d/zed.rc",
		"/usr/share/x":          "/usr/share/x",
	} {
		if got := zfs.Relocated(in); got != want {
			t.Errorf("relocate %s: %s, want %s", in, got, want)
		}
	}
}

func TestDefinitionErrors(t *testing.T) {
	for _, doc := range []string{
		"name: Bad Name\npackages: [a]\ncompatibility: '>= v1.8.0'\n",
		"name: x\npackages: []\ncompatibility: '>= v1.8.0'\n",
		"name: x\npackages: [a]\ncompatibility: 'soon'\n",
		"name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\nrelocate: [{from: /usr/bin, to: /usr/local/bin/}]\n",
		"name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\nfiles: [{path: etc/x, content: y}]\n",
		"name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\nfiles: [{path: /etc/x, mode: '0999'}]\n",
		"name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\nversion-from: b\n",
		"name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\nunknown: 1\n",
		"name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\ndescriptions: {Russian: текст}\n",
		"name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\ndescriptions: {ru: ''}\n",
		"name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\ndescriptions: {ru: \"две\\nстроки\"}\n",
	} {
		if _, err := Parse([]byte(doc), "test"); err == nil {
			t.Errorf("accepted:\n%s", doc)
		}
	}
}

// TestRelocationRules: relocate and links rules are refused, with the
// reason, where they would put a file outside the contract, never apply,
// or name no clean path.
func TestRelocationRules(t *testing.T) {
	const head = "name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\n"
	for doc, want := range map[string]string{
		"relocate: [{from: /usr/bin/, to: /opt/bin/}]":                                       "relocate /usr/bin/ -> /opt/bin/: the target is outside the extension contract's paths",
		"relocate: [{from: /usr/bin/, to: /usr/local/../bin/}]":                              "both must be absolute, clean directories",
		"relocate: [{from: /usr/, to: /usr/local/}, {from: /usr/bin/, to: /usr/local/bin/}]": "relocate /usr/bin/ -> /usr/local/bin/: never applies, the earlier rule from /usr/ takes its paths",
		"links: [{path: /usr/bin/x, target: /usr/local/bin/x}]":                              "link /usr/bin/x: outside the extension contract's paths",
		"links: [{path: usr/local/bin/x, target: x}]":                                        `link "usr/local/bin/x": want an absolute, clean path`,
		"links: [{path: /usr/local/bin/x, target: ''}]":                                      `link /usr/local/bin/x: target "": want a clean path`,
		"links: [{path: /usr/local/bin/x, target: a}, {path: /usr/local/bin/x, target: b}]":  "link /usr/local/bin/x: given twice",
		"links: [{path: /usr/local/bin/x, to: a}]":                                           "field to not found",
	} {
		_, err := Parse([]byte(head+doc+"\n"), "test")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	d, err := Parse([]byte(head+"relocate: [{from: /usr/bin/, to: /usr/local/bin/}, {from: /usr/lib/cni/, to: /usr/local/lib/cni/bin/}]\nlinks: [{path: /usr/local/sbin/btrfs, target: ../bin/btrfs}]\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Links) != 1 || d.Links[0].Target != "../bin/btrfs" || d.Relocated("/usr/lib/cni/bridge") != "/usr/local/lib/cni/bin/bridge" {
		t.Errorf("parsed %+v", d)
	}
}

const goodManifest = `version: v1alpha1
metadata:
  name: example
  version: 1.0.0
  author: third party
  description: an example
  compatibility:
    talos:
      version: ">= v1.8.0"
`

// writeExt lays out an extension directory with the given files.
func writeExt(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, "/") {
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func validateDir(t *testing.T, dir string) []string {
	t.Helper()
	rs, err := ValidatePath(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rs[0].Violations
}

// Third-party-style extensions, good and bad: each bad one fails with its
// reason.
func TestValidate(t *testing.T) {
	good := map[string]string{"manifest.yaml": goodManifest, "rootfs/usr/local/bin/tool": "x", "rootfs/usr/lib/firmware/fw.bin": "y", "rootfs/etc/cri/conf.d/10.part": "z"}
	if v := validateDir(t, writeExt(t, good)); len(v) != 0 {
		t.Fatalf("good extension: %v", v)
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		m[k] = v
		return m
	}
	cases := []struct {
		name, want string
		dir        string
	}{
		{"extra top-level file", "/README: top-level entries other than manifest.yaml and rootfs/ are not allowed", writeExt(t, with("README", "hi"))},
		{"outside the allowed paths", "/usr/bin/tool: outside the allowed paths", writeExt(t, with("rootfs/usr/bin/tool", "x"))},
		{"missing manifest", "manifest.yaml is missing", writeExt(t, map[string]string{"rootfs/usr/local/bin/tool": "x"})},
		{"bad manifest", "manifest.yaml: metadata.compatibility.talos.version", writeExt(t, with("manifest.yaml", strings.Replace(goodManifest, ">= v1.8.0", "whenever", 1)))},
	}
	ww := writeExt(t, good)
	os.Chmod(filepath.Join(ww, "rootfs/usr/local/bin/tool"), 0o666)
	cases = append(cases, struct{ name, want, dir string }{"world-writable file", "/usr/local/bin/tool: world-writable (mode 0666)", ww})
	fifo := writeExt(t, good)
	if err := syscall.Mkfifo(filepath.Join(fifo, "rootfs/usr/local/bin/pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct{ name, want, dir string }{"fifo", "/usr/local/bin/pipe: a fifo; extensions hold only files, directories and symlinks", fifo})
	for _, c := range cases {
		v := validateDir(t, c.dir)
		if !strings.Contains(strings.Join(v, "\n"), c.want) {
			t.Errorf("%s: violations %q, want one with %q", c.name, v, c.want)
		}
	}
}

// A device node can only arrive through an image: a tar stream.
func TestValidateTarDevice(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	add := func(h *tar.Header, data string) {
		h.Size = int64(len(data))
		tw.WriteHeader(h)
		tw.Write([]byte(data))
	}
	add(&tar.Header{Name: "manifest.yaml", Typeflag: tar.TypeReg, Mode: 0o644}, goodManifest)
	add(&tar.Header{Name: "rootfs/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "rootfs/usr/local/dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3}, "")
	tw.Close()
	es, man, err := ReadTar(&b)
	if err != nil {
		t.Fatal(err)
	}
	v := strings.Join(Validate(es, man), "\n")
	for _, want := range []string{"/usr/local/dev/null: a character device", "/usr/local/dev/null: world-writable"} {
		if !strings.Contains(v, want) {
			t.Errorf("violations %q lack %q", v, want)
		}
	}
}
