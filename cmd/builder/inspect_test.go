package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// runBuilder runs the CLI in-process and returns stdout and the error.
func runBuilder(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

type jsonDep struct {
	Name    string `json:"name"`
	Flags   uint32 `json:"flags"`
	Version string `json:"version"`
}

type jsonFile struct {
	Path   string `json:"path"`
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
	User   string `json:"user"`
	Group  string `json:"group"`
	LinkTo string `json:"linkTo"`
}

type jsonInspect struct {
	Name              string     `json:"name"`
	Epoch             *int64     `json:"epoch"`
	Version           string     `json:"version"`
	Release           string     `json:"release"`
	Arch              string     `json:"arch"`
	Disttag           string     `json:"disttag"`
	BuildTime         int64      `json:"buildTime"`
	SourceRPM         string     `json:"sourceRpm"`
	License           string     `json:"license"`
	PayloadCompressor string     `json:"payloadCompressor"`
	Requires          []jsonDep  `json:"requires"`
	Provides          []jsonDep  `json:"provides"`
	Conflicts         []jsonDep  `json:"conflicts"`
	Obsoletes         []jsonDep  `json:"obsoletes"`
	Files             []jsonFile `json:"files"`
	Signatures        []struct {
		KeyID     string `json:"keyId"`
		Algorithm string `json:"algorithm"`
		Verified  bool   `json:"verified"`
	} `json:"signatures"`
}

// rpmQuery runs Debian's rpm as the independent judge.
func rpmQuery(t *testing.T, file, qf string) []string {
	t.Helper()
	cmd := exec.Command("rpm", "-qp", "--nosignature", "--nodigest", "--dbpath", t.TempDir(), "--queryformat", qf, file)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rpm -qp %s: %v", file, err)
	}
	s := strings.TrimSuffix(string(out), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func none(s string) string {
	if s == "(none)" {
		return ""
	}
	return s
}

func TestInspectMatchesRPM(t *testing.T) {
	testutil.NeedTool(t, "rpm")
	files, _ := filepath.Glob(filepath.Join(testutil.Fixtures(t, "rpm"), "*.rpm"))
	if len(files) < 20 {
		t.Fatalf("expected the fixture RPMs, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, err := runBuilder(t, "inspect", "--json", f)
			if err != nil {
				t.Fatalf("inspect: %v", err)
			}
			validateSchema(t, "inspect.schema.json", []byte(out))
			var got jsonInspect
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			want := rpmQuery(t, f, "%{NAME}\n%{EPOCH}\n%{VERSION}\n%{RELEASE}\n%{ARCH}\n%{SOURCERPM}\n%{LICENSE}\n%{BUILDTIME}\n")
			epoch := "(none)"
			if got.Epoch != nil {
				epoch = strconv.FormatInt(*got.Epoch, 10)
			}
			gotMeta := []string{got.Name, epoch, got.Version, got.Release, got.Arch, got.SourceRPM, got.License, strconv.FormatInt(got.BuildTime, 10)}
			for i := range want {
				w := want[i]
				if i == 5 || i == 6 {
					w = none(w)
				}
				if gotMeta[i] != w {
					t.Errorf("field %d: got %q, rpm says %q", i, gotMeta[i], w)
				}
			}
			for _, k := range []struct {
				tag  string
				deps []jsonDep
			}{{"REQUIRE", got.Requires}, {"PROVIDE", got.Provides}, {"CONFLICT", got.Conflicts}, {"OBSOLETE", got.Obsoletes}} {
				want := rpmQuery(t, f, fmt.Sprintf("[%%{%sNAME}\x1f%%{%sFLAGS}\x1f%%{%sVERSION}\n]", k.tag, k.tag, k.tag))
				var gotl []string
				for _, d := range k.deps {
					gotl = append(gotl, fmt.Sprintf("%s\x1f%d\x1f%s", d.Name, d.Flags, d.Version))
				}
				if strings.Join(gotl, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s: got\n%q\nrpm says\n%q", k.tag, gotl, want)
				}
			}
			wantFiles := rpmQuery(t, f, "[%{FILENAMES}\x1f%{FILEMODES}\x1f%{FILESIZES}\x1f%{FILEDIGESTS}\x1f%{FILEUSERNAME}\x1f%{FILEGROUPNAME}\x1f%{FILELINKTOS}\n]")
			var gotFiles []string
			for _, fl := range got.Files {
				gotFiles = append(gotFiles, strings.Join([]string{fl.Path, fmt.Sprint(fl.Mode), fmt.Sprint(fl.Size), fl.Digest, fl.User, fl.Group, fl.LinkTo}, "\x1f"))
			}
			if strings.Join(gotFiles, "\n") != strings.Join(wantFiles, "\n") {
				t.Errorf("files: got\n%q\nrpm says\n%q", gotFiles, wantFiles)
			}
		})
	}
}

func TestInspectSignatures(t *testing.T) {
	rpms := testutil.Fixtures(t, "rpm")
	keys := testutil.Fixtures(t, "keys")
	good := []struct{ rpm, key string }{
		{"centos-release-5-0.0.el5.centos.2.x86_64.rpm", "RPM-GPG-KEY-CentOS-5"},
		{"centos-release-5-0.0.el5.centos.2.i386.rpm", "RPM-GPG-KEY-CentOS-5"},
		{"centos-release-6-0.el6.centos.5.x86_64.rpm", "RPM-GPG-KEY-CentOS-6"},
		{"centos-release-7-2.1511.el7.centos.2.10.x86_64.rpm", "RPM-GPG-KEY-CentOS-7"},
		{"epel-release-7-5.noarch.rpm", "RPM-GPG-KEY-CentOS-7"},
		{"hello-2.0-1.x86_64-signed.rpm", "rpm.org-rsa-2048-test.pub"},
		{"hello-2.0-1.x86_64-signed-with-subkey.rpm", "alice.asc"},
		{"centos-release-4-0.1.x86_64.rpm", "RPM-GPG-KEY-CentOS-4"},
		{"centos-release-3.1-1.i386.rpm", "RPM-GPG-KEY-CentOS-3"},
	}
	for _, g := range good {
		if _, err := runBuilder(t, "inspect", "--keyring", filepath.Join(keys, g.key), filepath.Join(rpms, g.rpm)); err != nil {
			t.Errorf("%s with %s: %v", g.rpm, g.key, err)
		}
	}
	bad := []struct{ rpm, key, msg string }{
		{"centos-release-7-2.1511.el7.centos.2.10.x86_64.rpm", "RPM-GPG-KEY-CentOS-6", "not in the keyring"},
		{"hello-2.0-1.x86_64-signed.rpm", "alice.asc", "not in the keyring"},
		{"hello-2.0-1.x86_64.rpm", "rpm.org-rsa-2048-test.pub", "package is not signed"},
	}
	for _, b := range bad {
		_, err := runBuilder(t, "inspect", "--keyring", filepath.Join(keys, b.key), filepath.Join(rpms, b.rpm))
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%s with %s: want error containing %q, got %v", b.rpm, b.key, b.msg, err)
		}
	}
}

// flip writes a copy of src with one byte inverted at off.
func flip(t *testing.T, src string, off int64) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0xff
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestInspectTampered(t *testing.T) {
	t.Parallel()
	rpms := testutil.Fixtures(t, "rpm")
	key := filepath.Join(testutil.Fixtures(t, "keys"), "rpm.org-rsa-2048-test.pub")
	signed := filepath.Join(rpms, "hello-2.0-1.x86_64-signed.rpm")
	// Flip the last byte of the main header's data area.
	raw, _ := os.ReadFile(signed)
	p, err := rpmfile.Open(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	sigLen := len(p.Signature.Raw) + (8-len(p.Signature.Raw)%8)%8
	i := rpmfile.LeadSize + sigLen + len(p.Header.Raw) - 2
	_, err = runBuilder(t, "inspect", "--keyring", key, flip(t, signed, int64(i)))
	if err == nil || !strings.Contains(err.Error(), "header-sha256 check failed") || !strings.Contains(err.Error(), "(RPMTAG_RSAHEADER) is BAD") {
		t.Errorf("flipped header byte: want header digest and signature failures, got %v", err)
	}
	// The last byte of the header-only signature, beside a good
	// header+payload one: exit 1 naming it (rpm -K: BAD, NOT OK).
	e, _ := p.Signature.Entry(rpmhdr.SigRSA)
	_, err = runBuilder(t, "inspect", "--keyring", key, flip(t, signed, int64(rpmfile.LeadSize+16+16*len(p.Signature.Entries)+int(e.Offset+e.Count)-1)))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "header-only RSA/SHA256 signature (RPMTAG_RSAHEADER) is BAD") || strings.Contains(err.Error(), "RPMSIGTAG_PGP") {
		t.Errorf("flipped header-only signature: want exit 1 naming it alone, got %v", err)
	}
	_, err = runBuilder(t, "inspect", "--keyring", key, flip(t, signed, -10))
	if err == nil || !strings.Contains(err.Error(), "payload") {
		t.Errorf("flipped payload byte: want a payload failure, got %v", err)
	}
	// Even without a keyring, a corrupt payload fails.
	_, err = runBuilder(t, "inspect", flip(t, filepath.Join(rpms, "payload-test-0.1-w6.xzdio.x86_64.rpm"), -40))
	if err == nil {
		t.Errorf("flipped xz payload byte: no error")
	}
	// Truncated and non-RPM files.
	tr := filepath.Join(t.TempDir(), "short.rpm")
	os.WriteFile(tr, raw[:200], 0o644)
	if _, err := runBuilder(t, "inspect", tr); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated: %v", err)
	}
	os.WriteFile(tr, []byte("hello world, not an rpm at all, padding padding padding padding padding padding padding padding padding"), 0o644)
	if _, err := runBuilder(t, "inspect", tr); err == nil || !strings.Contains(err.Error(), "not an rpm") {
		t.Errorf("garbage: %v", err)
	}
}
