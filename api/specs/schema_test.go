package specs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/demobase"
)

const specSchema = "../../docs/schemas/spec.schema.json"

// TestSpecSchema validates every shipped spec and the demo spec against
// docs/schemas/spec.schema.json, and checks that specs the reader refuses
// for their shape (unknown fields, wrong types, values outside an enum)
// the schema refuses too.
func TestSpecSchema(t *testing.T) {
	sch := testutil.Schema(t, "spec.schema.json")
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped specs: %v", err)
	}
	demo := t.TempDir()
	if err := demobase.Write(demo); err != nil {
		t.Fatal(err)
	}
	demoSpec := filepath.Join(demo, demobase.SpecFile)
	files = append(files, demoSpec)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := specs.Load(f); err != nil {
			t.Errorf("%s: the reader refuses it: %v", f, err)
		}
		if err := sch.Validate(testutil.YAMLDoc(t, b)); err != nil {
			t.Errorf("%s does not validate against %s: %v", f, specSchema, err)
		}
	}

	base, err := os.ReadFile(demoSpec)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string {
		t.Helper()
		if !bytes.Contains(base, []byte(old)) {
			t.Fatalf("the demo spec has no %q", old)
		}
		return strings.Replace(string(base), old, new, 1)
	}
	// Every section the reader knows, each field set: both accept it (a
	// misspelt key in the schema would refuse it).
	full := string(base) + `
excludes: ['*-debuginfo']
extensions-dir: ""
image:
  os: {id: demo, name: Demo, pretty-name: Demo 1, home-url: https://example.org}
  cmdline: [console=ttyS0]
  kernel-param-prefix: nodeforge
  platforms:
    - {name: metal, args: [console=ttyS0], arch-args: {arm64: [console=ttyAMA0]}, formats: [iso, ova], description: bare metal}
    - {name: lab, formats: [raw]}
  kernel: kernel-image-std-def
  init: {package: talos-installer, path: /usr/libexec/talos/init}
  installer: {package: talos-installer, path: /usr/bin/installer}
  bootloader: {package: systemd-boot-efi, path: /usr/lib/systemd/boot/efi/systemd-bootx64.efi}
  stub: {package: systemd-boot-efi, path: /usr/lib/systemd/boot/efi/linuxx64.efi.stub}
  talosctl: {package: talosctl, path: /usr/bin/talosctl}
  boot-modules: [loop]
  modules: [loop, squashfs]
  compression: xz
  compression-level: 9
  squashfs-writer: go
  initramfs-compression: xz
  drop: [{name: docs, paths: ['/usr/share/doc/**']}]
  users: [{name: app, uid: 1000, group: app, home: /var/lib/app, shell: /bin/false}]
  groups: [{name: app, gid: 1000}]
  setuid: [/usr/bin/su]
  strip-setuid: true
  world-writable: [/var/tmp]
  devices: allow
images:
  etcd:
    packages: [bash]
    architectures: [x86_64]
    entrypoint: [/usr/bin/etcd]
    cmd: [--version]
    env: {ETCD_DATA_DIR: /var/lib/etcd}
    workdir: /var/lib/etcd
    user: etcd
    users: [{name: etcd, uid: 65532, group: etcd, home: /var/lib/etcd, shell: /bin/false}]
    groups: [{name: etcd, gid: 65532}]
    labels: {org.example.component: etcd}
    annotations: {org.opencontainers.image.vendor: Example}
    links: {/usr/local/bin/etcd: /usr/bin/etcd}
    drop: [{name: docs, paths: ['/usr/share/doc/**']}]
    setuid: [/usr/bin/su]
    compression: zstd
    healthcheck: {command: [/usr/bin/etcdctl, endpoint, health], interval: 30s, timeout: 5s, start-period: 1m, retries: 3}
    ports: [2379, 2380/tcp]
    stop-signal: SIGTERM
  pause: {packages: [bash], cmd: [/bin/sh], user: "65535:65535"}
`
	full = strings.Replace(full, "channels:\n", "channels:\n  staging:\n    registry: registry.example.org:5000/nodeforge\n    ca-file: ca.pem\n    allow-http: true\n    builder-id: https://example.org/builder\n    public-key: keys/staging.pub\n", 1)
	if _, err := specs.Parse([]byte(full), demo, nil); err != nil {
		t.Fatalf("the full spec: %v", err)
	}
	if err := sch.Validate(testutil.YAMLDoc(t, []byte(full))); err != nil {
		t.Errorf("the full spec does not validate: %v", err)
	}

	for name, body := range map[string]string{
		"unknown top-level field":             string(base) + "bogus: 1\n",
		"unknown repository field":            edit("    format: alt\n", "    format: alt\n    mirror: x\n"),
		"unknown channel field":               edit("    key: keys/dev/cosign.key\n", "    key: keys/dev/cosign.key\n    password: x\n"),
		"architectures not a list":            edit("architectures: [x86_64]", "architectures: x86_64"),
		"version a list":                      edit("version: 1.11.0-demo", "version: [1, 11]"),
		"compression-level no int":            string(base) + "image:\n  compression-level: high\n",
		"unknown compression":                 string(base) + "image:\n  compression: brotli\n",
		"lz4 with the go writer":              string(base) + "image:\n  compression: lz4\n  squashfs-writer: go\n",
		"unknown component kind":              edit("    kind: rootfs\n", "    kind: initrd\n"),
		"kernel without packages":             edit("    packages: [kernel-image-std-def]\n", ""),
		"unknown repository format":           edit("    format: alt\n", "    format: deb\n"),
		"no name":                             edit("\nname: demo\n", "\n"),
		"relative init path":                  string(base) + "image:\n  init: {package: x, path: init}\n",
		"talosctl without a path":             string(base) + "image:\n  talosctl: {package: talosctl}\n",
		"platform name with a dash":           string(base) + "image:\n  platforms: [{name: my-cloud, formats: [raw]}]\n",
		"unknown platform format":             string(base) + "image:\n  platforms: [{name: metal, formats: [vmdk]}]\n",
		"bad parameter prefix":                string(base) + "image:\n  kernel-param-prefix: Talos.\n",
		"an alias listed twice":               edit("extension-aliases: [siderolabs]", "extension-aliases: [siderolabs, siderolabs]"),
		"image without packages":              string(base) + "images:\n  x: {entrypoint: [/bin/sh]}\n",
		"image with an upper case":            string(base) + "images:\n  X: {packages: [bash], entrypoint: [/bin/sh]}\n",
		"image without entrypoint":            string(base) + "images:\n  x: {packages: [bash]}\n",
		"image user with a colon":             string(base) + "images:\n  x: {packages: [bash], entrypoint: [/bin/sh], user: 'a:b'}\n",
		"image relative workdir":              string(base) + "images:\n  x: {packages: [bash], entrypoint: [/bin/sh], workdir: var}\n",
		"image relative link":                 string(base) + "images:\n  x: {packages: [bash], entrypoint: [/bin/sh], links: {usr/x: /bin/sh}}\n",
		"image layer compression":             string(base) + "images:\n  x: {packages: [bash], entrypoint: [/bin/sh], compression: xz}\n",
		"image unknown field":                 string(base) + "images:\n  x: {packages: [bash], entrypoint: [/bin/sh], volumes: [/x]}\n",
		"image healthcheck without a command": string(base) + "images:\n  x: {packages: [bash], entrypoint: [/bin/sh], healthcheck: {interval: 1s}}\n",
		"image healthcheck interval":          string(base) + "images:\n  x: {packages: [bash], entrypoint: [/bin/sh], healthcheck: {command: [/bin/true], interval: soon}}\n",
		"image port with a protocol":          string(base) + "images:\n  x: {packages: [bash], entrypoint: [/bin/sh], ports: [80/http]}\n",
		"registry and layout":                 edit("    key: keys/dev/cosign.key\n", "    key: keys/dev/cosign.key\n    registry: r.example.org\n    layout: out\n"),
	} {
		if _, err := specs.Parse([]byte(body), demo, nil); err == nil {
			t.Errorf("%s: the reader accepts it", name)
		}
		if err := sch.Validate(testutil.YAMLDoc(t, []byte(body))); err == nil {
			t.Errorf("%s: the schema accepts what the reader refuses", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
}
