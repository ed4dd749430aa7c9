package report

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func hex64(c string) string { return strings.Repeat(c, 64) }

func oci(c string) string { return "sha256:" + hex64(c) }

// full is a report with every field of every type set (TestFullIsFull
// holds it to that), so that the schema sees each one.
func full() *Report {
	fe := func(p string) []FileEntry {
		return []FileEntry{{Path: p, Type: "file", Mode: "0644", UID: 1, GID: 1, Size: 3, SHA256: hex64("a"), Target: "/t",
			Link: "/l", Xattrs: []string{"user.x"}, Origin: Origin{Package: "p-1-alt1.x86_64", RPMSHA256: hex64("b"), Path: "/usr/bin/l"},
			RPMDigest: "abcdef"}, {Path: p + "/g", Type: "dir", Mode: "0755", Origin: Origin{Generator: "implicit-directory"}}}
	}
	so := ScriptletOutcome{Package: "p", Kind: "post", Handled: true, How: []string{"ldconfig"}, Pending: []string{"echo"}}
	return &Report{
		Spec:       SpecInfo{Name: "p11", Branch: "p11", Version: "1.11.0", SHA256: hex64("1")},
		LockSHA256: hex64("2"), SourceDateEpoch: 1700000000, Builder: "v1", Tools: map[string]string{"squashfs": "sqfs"},
		Compressors: map[string]string{"squashfs zstd": "github.com/DataDog/zstd@v1.5.7"},
		OCIIndex:    oci("3"), Installer: oci("4"),
		Media: &MediaReport{Schematic: hex64("5"), Platform: "metal", Extensions: []string{"ext"},
			Files: map[string]ArtifactInfo{"media/" + hex64("5") + "/metal-amd64.iso": {SHA256: hex64("6"), Size: 1}}, Installer: oci("7"),
			NoDiskImages: "no EFI boot manager",
			SecureBoot: &SecureBootReport{SigningCert: "-----BEGIN CERTIFICATE-----\n", SigningCertSHA256: hex64("8"), Subject: "CN=db",
				Stub: map[string]string{"x86_64": "systemd-stub"}, Bootloader: map[string]string{"x86_64": "systemd-boot"}, EnrolsKeys: true,
				Installer: oci("9"), PCRPublicKey: "-----BEGIN PUBLIC KEY-----\n", PCR11: map[string]string{"x86_64": hex64("a")}}},
		Extensions: map[string]string{"ext": oci("b")},
		Images:     map[string]string{"etcd": oci("9")},
		Architectures: map[string]*ArchReport{"x86_64": {
			Packages: []string{"p"}, Kernel: &KernelInfo{Package: "kernel", Version: "6.12", VmlinuzPath: "/boot/vmlinuz", Modules: 2,
				BootModules: []string{"kernel/a.ko"}, Builtin: []string{"kernel/b.ko"}},
			Cmdline: "console=ttyS0", Init: "init", Scriptlets: []ScriptletOutcome{so}, Triggers: []ScriptletOutcome{so}, Unhandled: 1,
			Ghosts: []string{"/g"}, Dropped: []DropResult{{Rule: "docs", Paths: 1, Bytes: 2}},
			Policy:    PolicyResult{Setuid: []string{"/s"}, Stripped: []string{"/t"}, WorldWritable: []string{"/tmp"}, Capabilities: []string{"/c"}},
			Libraries: []string{"libc.so.6"}, Rootfs: fe("/a"), Initramfs: fe("/init"),
			Extensions: map[string]*ExtensionReport{"ext": {Version: "1", Packages: []string{"e"}, Excluded: []string{"x"}, Modules: true,
				Layer: oci("c"), Files: fe("/usr/e")}},
			Media: fe("/m"),
			UKI: &UKIReport{File: "x86_64/uki.efi", UnsignedSHA256: hex64("d"), SigningCertSHA256: hex64("e"), Subject: "CN=db",
				Stub: "systemd-stub", Kernel: "kernel", Initramfs: "x86_64/initramfs.xz", PCR11: hex64("f")},
			Images: map[string]*ImageReport{"etcd": {Packages: []string{"etcd"}, Scriptlets: []ScriptletOutcome{so}, Ghosts: []string{"/g"},
				Dropped: []DropResult{{Rule: "docs", Paths: 1, Bytes: 2}}, Policy: PolicyResult{Setuid: []string{"/s"}, Stripped: []string{"/t"}, WorldWritable: []string{"/tmp"}, Capabilities: []string{"/c"}},
				Libraries: []string{"libc.so.6"}, Layer: oci("8"), Files: fe("/usr/bin/etcd")}},
		}},
		Generators: map[string]string{"passwd": "accounts from scriptlets"},
		Artifacts:  map[string]ArtifactInfo{"x86_64/rootfs.sqsh": {SHA256: hex64("0"), Size: 4096}},
	}
}

// zeroFields lists the fields of v (followed through pointers, slices and
// maps) left at their zero value: in every element, for a slice.
func zeroFields(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return zeroFields(v.Elem(), path)
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return []string{path}
		}
		if v.Kind() == reflect.Slice {
			return zeroInAll(v, path+"[]")
		}
		return zeroFields(v.MapIndex(v.MapKeys()[0]), path+"[]")
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

// zeroInAll lists the fields zero in every element of the slice v.
func zeroInAll(v reflect.Value, path string) []string {
	count := map[string]int{}
	for i := range v.Len() {
		for _, f := range zeroFields(v.Index(i), path) {
			count[f]++
		}
	}
	var out []string
	for f, n := range count {
		if n == v.Len() {
			out = append(out, f)
		}
	}
	return out
}

// TestFullIsFull: a field added to a report type must be added to full()
// too, and so reach the schema test.
func TestFullIsFull(t *testing.T) {
	if z := zeroFields(reflect.ValueOf(full()), "Report"); len(z) > 0 {
		t.Errorf("full() leaves fields unset (set them, so that the schema test sees them): %v", z)
	}
}

func validate(t *testing.T, s *jsonschema.Schema, r *Report) error {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return testutil.Validate(s, b)
}

// TestSchema: the published schema (docs/schemas/report.schema.json, which
// refuses unknown fields) accepts a report with every field set and one
// with the lists a build may leave nil; it refuses a report without a
// required field or with a malformed digest.
func TestSchema(t *testing.T) {
	s := testutil.Schema(t, "report.schema.json")
	if err := validate(t, s, full()); err != nil {
		t.Errorf("the schema refuses a full report: %v", err)
	}
	min := &Report{Spec: SpecInfo{Name: "p11", Branch: "p11", Version: "1", SHA256: hex64("1")}, LockSHA256: hex64("2"),
		OCIIndex: oci("3"), Installer: oci("4"), Tools: map[string]string{}, Generators: map[string]string{}, Artifacts: map[string]ArtifactInfo{},
		Architectures: map[string]*ArchReport{"x86_64": {Packages: []string{}, Kernel: &KernelInfo{BootModules: []string{}},
			Scriptlets: []ScriptletOutcome{}, Triggers: []ScriptletOutcome{}, Dropped: []DropResult{},
			Policy: PolicyResult{Setuid: []string{}, Stripped: []string{}, WorldWritable: []string{}, Capabilities: []string{}},
			Rootfs: []FileEntry{}, Initramfs: []FileEntry{}}}}
	if err := validate(t, s, min); err != nil {
		t.Errorf("the schema refuses a report with nil lists and maps: %v", err)
	}
	bad := full()
	bad.LockSHA256 = "sha256:" + hex64("2")
	if validate(t, s, bad) == nil {
		t.Error("the schema accepts a lockSha256 with an algorithm prefix")
	}
	bad = full()
	bad.Architectures["x86_64"].Rootfs[0].Mode = "644"
	if validate(t, s, bad) == nil {
		t.Error("the schema accepts a three-digit mode")
	}
}

func TestOrigin(t *testing.T) {
	if got := (Origin{Package: "p-1-alt1.x86_64", RPMSHA256: hex64("a")}).String(); got != "p-1-alt1.x86_64" {
		t.Errorf("package origin %q", got)
	}
	if got := (Origin{Generator: "passwd"}).String(); got != "builder generator passwd" {
		t.Errorf("generator origin %q", got)
	}
}

func TestUnlike(t *testing.T) {
	a := map[string]string{"squashfs zstd": "zstd@v1", "layers gzip": "gzip@v1", "initramfs xz": "xz@v1"}
	b := map[string]string{"squashfs zstd": "zstd@v2", "layers gzip": "gzip@v1", "iso": "xorriso"}
	got := Unlike(a, b)
	want := [][3]string{{"initramfs xz", "xz@v1", "none"}, {"iso", "none", "xorriso"}, {"squashfs zstd", "zstd@v1", "zstd@v2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Unlike = %v, want %v", got, want)
	}
	if got := Unlike(a, a); got != nil {
		t.Errorf("Unlike of equal maps = %v", got)
	}
	if got := Unlike(nil, nil); got != nil {
		t.Errorf("Unlike of nothing = %v", got)
	}
}
