package builder

import (
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// debianLaid lays files as Debian's containerd, runc and CNI plugins ship
// them (their layout, stand-in bytes).
func debianLaid(t *testing.T, extra ...*rootfs.Node) *rootfs.Tree {
	t.Helper()
	pkg := func(name string) report.Origin { return report.Origin{Package: name + "-1-1.x86_64"} }
	file := func(p, pk, data string) *rootfs.Node {
		return &rootfs.Node{Path: p, Kind: rootfs.KindFile, Mode: 0o755, User: "root", Group: "root", Data: []byte(data), Digest: digest.SHA256Hex([]byte(data)), Origin: pkg(pk)}
	}
	link := func(p, pk, target string) *rootfs.Node {
		return &rootfs.Node{Path: p, Kind: rootfs.KindSymlink, Mode: 0o777, User: "root", Group: "root", Target: target, Origin: pkg(pk)}
	}
	laid := rootfs.New()
	for _, n := range append([]*rootfs.Node{
		{Path: "/usr/lib/cni", Kind: rootfs.KindDir, Mode: 0o755, User: "root", Group: "root", Origin: pkg("containernetworking-plugins")},
		file("/usr/bin/containerd", "containerd", "\x7fELF\x00 names /usr/lib/cni inside a program: not a config file"),
		file("/usr/bin/containerd-shim", "containerd", "\x7fELF\x00"),
		file("/etc/containerd/config.toml", "containerd", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/usr/lib/cni\"\n"),
		file("/usr/sbin/runc", "runc", "\x7fELF\x00"),
		link("/usr/bin/runc", "runc", "../sbin/runc"),
		file("/usr/lib/cni/loopback", "containernetworking-plugins", "\x7fELF\x00"),
		link("/usr/lib/cni/ctr", "containernetworking-plugins", "../../bin/containerd"),
		link("/usr/bin/python", "containerd", "/usr/bin/python3"), // the root's, not the extension's
		file("/usr/share/containerd/notes.txt", "containerd", "the binaries are in /usr/bin/ and /usr/sbin\n"),
	}, extra...) {
		if err := laid.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return laid
}

func criDefinition(t *testing.T, rules string) *extensions.Definition {
	t.Helper()
	d, err := extensions.Parse([]byte(`name: cri
packages: [containerd]
compatibility: ">= v1.8.0"
relocate:
  - {from: /usr/bin/, to: /usr/local/bin/}
  - {from: /usr/sbin/, to: /usr/local/sbin/}
  - {from: /usr/lib/cni/, to: /usr/local/lib/cni/bin/}
  - {from: /etc/containerd/, to: /usr/local/etc/containerd/}
`+rules), "test")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRelocateRefuses: what cannot be relocated safely is refused, each
// file named with its package and the reason: a configuration file naming
// a path the relocation moves (Debian's config.toml names /usr/lib/cni), a
// file no rule moves out of the forbidden trees, a link to a dropped file.
func TestRelocateRefuses(t *testing.T) {
	laid := debianLaid(t, &rootfs.Node{Path: "/usr/bin/old-shim", Kind: rootfs.KindSymlink, Mode: 0o777, User: "root", Group: "root",
		Target: "containerd-shim", Origin: report.Origin{Package: "containerd-1-1.x86_64"}})
	_, err := relocate(criDefinition(t, "drop: [/usr/bin/containerd-shim]\n"), laid)
	if err == nil {
		t.Fatal("relocated")
	}
	for _, want := range []string{
		"/etc/containerd/config.toml, relocated to /usr/local/etc/containerd/config.toml (containerd-1-1.x86_64): names /usr/lib/cni, which the relocation moves to /usr/local/lib/cni/bin",
		"/usr/share/containerd/notes.txt (containerd-1-1.x86_64): outside the extension contract's paths and no relocate rule moves it",
		"/usr/bin/old-shim (containerd-1-1.x86_64): a link to /usr/bin/containerd-shim, which a drop rule removes",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "/usr/bin/containerd (") {
		t.Errorf("a program naming a moved path is refused as a config file:\n%v", err)
	}
}

// TestRelocateTraced: relocated files keep their package and record the
// path it gave them; links follow what they named (relative ones stay
// relative), links to the root's files stay; the definition's links are
// the builder's.
func TestRelocateTraced(t *testing.T) {
	d := criDefinition(t, "drop: [/usr/bin/containerd-shim, /usr/share/**, /etc/containerd/config.toml]\nlinks: [{path: /usr/local/bin/cni-loopback, target: ../lib/cni/bin/loopback}]\n")
	tree, err := relocate(d, debianLaid(t))
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"/usr/local/bin/containerd":        "/usr/bin/containerd",
		"/usr/local/lib/cni/bin/loopback":  "/usr/lib/cni/loopback",
		"/usr/local/lib/cni/bin":           "/usr/lib/cni",
		"/usr/local/bin/runc":              "/usr/bin/runc",
		"/usr/local/lib/cni/bin/ctr":       "/usr/lib/cni/ctr",
		"/usr/local/bin/cni-loopback":      "",
		"/usr/local/etc/containerd/config": "",
	} {
		n := tree.Get(p)
		if n == nil {
			if want != "" {
				t.Errorf("%s missing", p)
			}
			continue
		}
		if n.Origin.Path != want || (want != "" && n.Origin.Package == "") {
			t.Errorf("%s: origin %+v, want the package's path %q", p, n.Origin, want)
		}
	}
	for p, want := range map[string]string{
		"/usr/local/bin/runc":         "../sbin/runc",
		"/usr/local/lib/cni/bin/ctr":  "../../../bin/containerd",
		"/usr/local/bin/python":       "/usr/bin/python3",
		"/usr/local/bin/cni-loopback": "../lib/cni/bin/loopback",
	} {
		if n := tree.Get(p); n == nil || n.Target != want {
			t.Errorf("%s: %+v, want a link to %s", p, n, want)
		}
	}
	if n := tree.Get("/usr/local/bin/cni-loopback"); n == nil || n.Origin.Generator != "extension-link" {
		t.Errorf("the definition's link: %+v", n)
	}
	if _, ok := generatorDocs["extension-link"]; !ok {
		t.Error("generator extension-link is not documented")
	}
}
