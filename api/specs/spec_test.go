package specs

import (
	"slices"
	"strings"
	"testing"
)

func TestShippedSpecsParse(t *testing.T) {
	names := Shipped()
	want := []string{"c10f2", "p10", "p11", "sisyphus"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("shipped specs %v, want %v", names, want)
	}
	for _, n := range names {
		s, err := LoadShipped(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if s.Name != n || len(s.Repositories) == 0 || len(s.Repositories[0].Fingerprints) == 0 {
			t.Errorf("%s: %+v", n, s)
		}
		if got := s.Repositories[0].DistURLs("x86_64"); len(got) != 2 || !strings.HasSuffix(got[0], "/x86_64") || !strings.HasSuffix(got[1], "/noarch") {
			t.Errorf("%s: dist urls %v", n, got)
		}
		for _, c := range []string{"kernel", "rootfs", "installer", "cri", "zfs", "btrfs", "nvidia"} {
			if _, ok := s.Components[c]; !ok {
				t.Errorf("%s: no component %s", n, c)
			}
		}
	}
}

func TestSpecErrors(t *testing.T) {
	cases := map[string]string{
		"unknown field":                  "name: x\nversion: 1\nbogus: 1\n",
		"no version":                     "name: x\narchitectures: [x86_64]\n",
		"bad format":                     "name: x\nversion: 1\narchitectures: [x86_64]\nrepositories: [{name: r, url: /x, format: deb, insecure-skip-verify: true}]\ncomponents: {k: {kind: kernel, packages: [a]}}\n",
		"no keyring":                     "name: x\nversion: 1\narchitectures: [x86_64]\nrepositories: [{name: r, url: /x, format: alt}]\ncomponents: {k: {kind: kernel, packages: [a]}}\n",
		"bad kind":                       "name: x\nversion: 1\narchitectures: [x86_64]\nrepositories: [{name: r, url: /x, format: alt, insecure-skip-verify: true}]\ncomponents: {k: {kind: other, packages: [a]}}\n",
		"empty packages":                 "name: x\nversion: 1\narchitectures: [x86_64]\nrepositories: [{name: r, url: /x, format: alt, insecure-skip-verify: true}]\ncomponents: {k: {kind: kernel, packages: []}}\n",
		"bad namespace":                  "name: x\nversion: 1\narchitectures: [x86_64]\nextensions-namespace: Alt/Linux\nrepositories: [{name: r, url: /x, format: alt, insecure-skip-verify: true}]\ncomponents: {k: {kind: kernel, packages: [a]}}\n",
		"alias is the namespace":         "name: x\nversion: 1\narchitectures: [x86_64]\nextensions-namespace: altlinux\nextension-aliases: [altlinux]\nrepositories: [{name: r, url: /x, format: alt, insecure-skip-verify: true}]\ncomponents: {k: {kind: kernel, packages: [a]}}\n",
		"alias is the default namespace": "name: x\nversion: 1\narchitectures: [x86_64]\nextension-aliases: [siderolabs]\nrepositories: [{name: r, url: /x, format: alt, insecure-skip-verify: true}]\ncomponents: {k: {kind: kernel, packages: [a]}}\n",
		"alias listed twice":             "name: x\nversion: 1\narchitectures: [x86_64]\nextensions-namespace: altlinux\nextension-aliases: [siderolabs, siderolabs]\nrepositories: [{name: r, url: /x, format: alt, insecure-skip-verify: true}]\ncomponents: {k: {kind: kernel, packages: [a]}}\n",
	}
	for name, y := range cases {
		if _, err := Parse([]byte(y), "/spec", nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	s, err := Parse([]byte("name: x\nversion: 1\narchitectures: [x86_64]\nextensions-namespace: altlinux\nextension-aliases: [siderolabs]\nrepositories: [{name: r, url: base, format: alt, keyring: [k.asc]}]\ncomponents: {k: {kind: kernel, packages: [a]}}\n"), "/spec", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.ExtensionsNamespace != "altlinux" || len(s.ExtensionAliases) != 1 {
		t.Errorf("namespace: %q %q", s.ExtensionsNamespace, s.ExtensionAliases)
	}
	if s.Repositories[0].URL != "/spec/base" || s.Repositories[0].Keyring[0] != "/spec/k.asc" {
		t.Errorf("relative paths not resolved: %+v", s.Repositories[0])
	}
	if err := s.Override(map[string]string{"r": "http://mirror/x"}, nil); err != nil || s.Repositories[0].URL != "http://mirror/x" {
		t.Errorf("override: %v %+v", err, s.Repositories[0])
	}
	if err := s.Override(map[string]string{"nope": "x"}, nil); err == nil {
		t.Error("override of an unknown repository accepted")
	}
	if err := s.Override(nil, map[string][]string{"r": {"/p.asc", "/base.asc"}}); err != nil || !slices.Equal(s.Repositories[0].Keyring, []string{"/p.asc", "/base.asc"}) {
		t.Errorf("keyrings: %v %q", err, s.Repositories[0].Keyring)
	}
	const fpr = "0123456789ABCDEF0123456789ABCDEF01234567"
	s.Repositories[0].Fingerprints = []string{"AAAA"}
	if err := s.Pin(map[string][]string{"r": {"0123 4567 89ab cdef 0123  4567 89AB CDEF 0123 4567", fpr}}); err != nil || !slices.Equal(s.Repositories[0].Fingerprints, []string{"AAAA", fpr}) {
		t.Errorf("pin: %v %q", err, s.Repositories[0].Fingerprints)
	}
	for _, bad := range []map[string][]string{{"nope": {fpr}}, {"r": {"12345"}}, {"r": {fpr + "zz"}}} {
		if err := s.Pin(bad); err == nil {
			t.Errorf("pin %v accepted", bad)
		}
	}
}

func TestVerifyAndKernel(t *testing.T) {
	const head = "name: x\nversion: 1\narchitectures: [x86_64]\ncomponents: {k: {kind: kernel, packages: [a]}}\n"
	for name, c := range map[string]struct{ yaml, err string }{
		"default":           {"repositories: [{name: r, url: /x, format: rpm-md, keyring: [k]}]\n", ""},
		"packages":          {"repositories: [{name: r, url: /x, format: rpm-md, keyring: [k], verify: packages}]\n", ""},
		"packages, alt":     {"repositories: [{name: r, url: /x, format: alt, keyring: [k], verify: packages}]\n", "verify: packages is for rpm-md"},
		"packages, no keys": {"repositories: [{name: r, url: /x, format: rpm-md, verify: packages}]\n", "a keyring is required"},
		"packages+insecure": {"repositories: [{name: r, url: /x, format: rpm-md, verify: packages, insecure-skip-verify: true}]\n", "cannot go with insecure-skip-verify"},
		"unknown mode":      {"repositories: [{name: r, url: /x, format: rpm-md, keyring: [k], verify: none}]\n", `verify "none": want all or packages`},
		"image.kernel":      {"repositories: [{name: r, url: /x, format: rpm-md, keyring: [k]}]\nimage: {kernel: kernel-core}\n", ""},
		"bad image.kernel":  {"repositories: [{name: r, url: /x, format: rpm-md, keyring: [k]}]\nimage: {kernel: 'a b'}\n", "image.kernel"},
	} {
		s, err := Parse([]byte(head+c.yaml), "/spec", nil)
		if c.err == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			} else if want := map[bool]string{true: VerifyPackages, false: VerifyAll}[name == "packages"]; s.Repositories[0].Verify != want {
				t.Errorf("%s: verify %q, want %q", name, s.Repositories[0].Verify, want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: want an error containing %q, got %v", name, c.err, err)
		}
	}
	s, err := Parse([]byte(head+"repositories: [{name: r, url: /x, format: alt, keyring: [k]}]\nimage: {kernel: kernel-image-un-def}\n"), "/spec", nil)
	if err != nil || s.KernelFlavour() != "un-def" {
		t.Errorf("flavour from image.kernel: %v %q", err, s.KernelFlavour())
	}
}

// TestImages: the images section's defaults, and its errors named by
// image and field.
func TestImages(t *testing.T) {
	head := "name: x\nversion: 1\narchitectures: [x86_64, aarch64]\nrepositories: [{name: r, url: /x, format: alt, insecure-skip-verify: true}]\ncomponents: {k: {kind: kernel, packages: [a]}}\n"
	s, err := Parse([]byte(head+"images:\n  etcd: {packages: [etcd], entrypoint: [/usr/bin/etcd]}\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	im := s.Images["etcd"]
	if !slices.Equal(im.Architectures, []string{"x86_64", "aarch64"}) || im.User != "root" || im.Compression != "gzip" || len(im.Drop) != len(DefaultDrop) {
		t.Errorf("defaults: %+v", im)
	}
	if s, err = Parse([]byte(head+"images:\n  etcd: {packages: [etcd], entrypoint: [/usr/bin/etcd], ports: [2379, 53/udp]}\n"), "", nil); err != nil || !slices.Equal(s.Images["etcd"].Ports, []string{"2379/tcp", "53/udp"}) {
		t.Errorf("ports: %v %v", err, s)
	}
	for body, want := range map[string]string{
		"images:\n  etcd: {packages: [etcd], entrypoint: [/usr/bin/etcd], architectures: [ppc64le]}\n":             `images.etcd: architecture "ppc64le" is not one of the spec's (x86_64, aarch64)`,
		"images:\n  etcd: {packages: [etcd], entrypoint: [etcd]}\n":                                                `images.etcd.entrypoint "etcd" must be an absolute path`,
		"images:\n  etcd: {packages: [etcd]}\n":                                                                    `images.etcd: an entrypoint or a cmd is required`,
		"images:\n  Etcd: {packages: [etcd], cmd: [/bin/sh]}\n":                                                    `images.Etcd: the name must be lower-case`,
		"images:\n  etcd: {entrypoint: [/bin/sh]}\n":                                                               `images.etcd lists no packages`,
		"images:\n  etcd: {packages: [etcd], cmd: [/bin/sh], env: {1X: y}}\n":                                      `images.etcd.env: "1X" is not a variable name`,
		"images:\n  etcd: {packages: [etcd], cmd: [/bin/sh], user: 'a:b'}\n":                                       `images.etcd.user "a:b": want a user name, a UID or UID:GID`,
		"images:\n  etcd: {packages: [etcd], cmd: [/bin/sh], links: {/usr/../x: /bin/sh}}\n":                       `images.etcd.links: "/usr/../x" must be an absolute, clean path`,
		"images:\n  etcd: {packages: [etcd], cmd: [/bin/sh], compression: xz}\n":                                   `images.etcd.compression "xz": want gzip or zstd`,
		"images:\n  etcd: {packages: [etcd], cmd: [/bin/sh], healthcheck: {command: [etcdctl]}}\n":                 `images.etcd.healthcheck.command ["etcdctl"] must start with an absolute path`,
		"images:\n  etcd: {packages: [etcd], cmd: [/bin/sh], healthcheck: {command: [/bin/true], timeout: -1s}}\n": `images.etcd.healthcheck.timeout "-1s": want a duration`,
		"images:\n  etcd: {packages: [etcd], cmd: [/bin/sh], ports: [70000]}\n":                                    `images.etcd.ports "70000": want PORT (1-65535)`,
		"images:\n  etcd: {packages: [etcd], cmd: [/bin/sh], stop-signal: TERM}\n":                                 `images.etcd.stop-signal "TERM": want a signal name`,
	} {
		_, err := Parse([]byte(head+body), "", nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
