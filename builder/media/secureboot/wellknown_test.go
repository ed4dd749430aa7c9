package secureboot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

// wellKnownWant are the well-known certificates of wellknown/README.md:
// subject CN and SHA-256 fingerprint, in enrolment order.
var wellKnownWant = map[string][][2]string{
	"KEK": {
		{"Microsoft Corporation KEK CA 2011", "a1117f516a32cefcba3f2d1ace10a87972fd6bbe8fe0d0b996e09e65d802a503"},
		{"Microsoft Corporation KEK 2K CA 2023", "3cd3f0309edae228767a976dd40d9f4affc4fbd5218f2e8cc3c9dd97e8ac6f9d"},
	},
	"db": {
		{"Microsoft Corporation UEFI CA 2011", "48e99b991f57fc52f76149599bff0a58c47154229b9f8d603ac40d3500248507"},
		{"Microsoft Option ROM UEFI CA 2023", "e5be3e64c6e66a281457ecdece0d6d0787577aad2a3a0144262c10c14ba8d8f1"},
		{"Microsoft UEFI CA 2023", "f6124e34125bee3fe6d79a574eaa7b91c0e7bd9d929c1a321178efd611dad901"},
	},
}

// TestWellKnownCertificates: the embedded certificates are upstream's
// five, as openssl reads them (subject, SHA-256 fingerprint), and the 2011
// ones are those Debian's OVMF_VARS_4M.ms.fd enrols.
func TestWellKnownCertificates(t *testing.T) {
	openssl := testutil.NeedTool(t, "openssl")
	msVars, err := os.ReadFile(testutil.NeedFile(t, "/usr/share/OVMF/OVMF_VARS_4M.ms.fd", "ovmf"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range wellKnownWant {
		certs, err := WellKnown(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(certs) != len(want) {
			t.Fatalf("%s: %d certificates, want %d", name, len(certs), len(want))
		}
		for i, c := range certs {
			sum := sha256.Sum256(c.Raw)
			if c.Subject.CommonName != want[i][0] || hex.EncodeToString(sum[:]) != want[i][1] {
				t.Errorf("%s #%d: %q %x, want %q %s", name, i, c.Subject.CommonName, sum, want[i][0], want[i][1])
			}
			out, err := exec.Command(openssl, "x509", "-inform", "DER", "-in", filepath.Join("wellknown", wellKnownFiles[name][i]),
				"-noout", "-subject", "-fingerprint", "-sha256").CombinedOutput()
			fp := strings.ToUpper(want[i][1])
			if err != nil || !strings.Contains(string(out), "CN = "+want[i][0]) || !strings.Contains(strings.ReplaceAll(string(out), ":", ""), fp) {
				t.Errorf("openssl x509 %s: %v\n%s", wellKnownFiles[name][i], err, out)
			}
			if strings.HasSuffix(want[i][0], "2011") && !bytes.Contains(msVars, c.Raw) {
				t.Errorf("%s: not the certificate Debian's OVMF_VARS_4M.ms.fd enrols", want[i][0])
			}
		}
	}
	if _, err := WellKnown("PK"); err == nil {
		t.Error("well-known certificates for PK")
	}
}

// TestWellKnownAgainstEfitools: KEK.wellknown.auth and db.wellknown.auth
// are what efitools writes for the set's own signature list followed by
// cert-to-efi-sig-list's of each well-known certificate with Microsoft's
// owner GUID, signed by sign-efi-sig-list with PK (KEK) and KEK (db) and
// the set's time stamp: byte for byte. sig-list-to-certs reads the
// certificates back, and openssl names them.
func TestWellKnownAgainstEfitools(t *testing.T) {
	toESL := testutil.NeedTool(t, "cert-to-efi-sig-list")
	signESL := testutil.NeedTool(t, "sign-efi-sig-list")
	toCerts := testutil.NeedTool(t, "sig-list-to-certs")
	openssl := testutil.NeedTool(t, "openssl")
	stamp := time.Date(2026, 12, 3, 18, 30, 1, 0, time.UTC)
	ks, files := generate(t, stamp)
	dir := writeSet(t, files, nil, nil)
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "TZ=UTC", "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	owner := strings.ToLower(ks.Owner.String())
	for _, v := range wellKnownNames {
		esl := filepath.Join(dir, "efitools-"+v.name+".esl")
		run(toESL, "-g", owner, filepath.Join(dir, v.name+".pem"), esl)
		lists, _ := os.ReadFile(esl)
		certs, _ := WellKnown(v.name)
		for i, c := range certs {
			p := filepath.Join(dir, fmt.Sprintf("%s-wellknown-%d", v.name, i))
			os.WriteFile(p+".pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o600)
			run(toESL, "-g", "77fa9abd-0359-4d32-bd60-28f4e78f784b", p+".pem", p+".esl")
			b, _ := os.ReadFile(p + ".esl")
			lists = append(lists, b...)
		}
		os.WriteFile(esl, lists, 0o600)
		auth := filepath.Join(dir, "efitools-"+v.name+WellKnownSuffix)
		run(signESL, "-g", owner, "-t", stamp.Format("2006-01-02 15:04:05"), "-k", filepath.Join(dir, v.signer+".key"),
			"-c", filepath.Join(dir, v.signer+".pem"), v.name, esl, auth)
		sameFile(t, auth, files[v.name+WellKnownSuffix])

		// What systemd-boot enrols: the lists after the descriptor.
		_, data, err := splitAuth(files[v.name+WellKnownSuffix])
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, v.name+".data.esl"), data, 0o600)
		out := run(toCerts, filepath.Join(dir, v.name+".data.esl"), filepath.Join(dir, v.name+"-out"))
		if n := strings.Count(out, "77fa9abd-0359-4d32-bd60-28f4e78f784b"); n != len(certs) {
			t.Errorf("sig-list-to-certs %s: %d lists owned by Microsoft, want %d:\n%s", v.name, n, len(certs), out)
		}
		for i, want := range append([]string{"Nodeforge test " + v.name}, cnsOf(wellKnownWant[v.name])...) {
			subj := run(openssl, "x509", "-inform", "DER", "-in", filepath.Join(dir, fmt.Sprintf("%s-out-%d.der", v.name, i)), "-noout", "-subject")
			if !strings.Contains(subj, "CN = "+want) {
				t.Errorf("%s list #%d: %s, want CN = %s", v.name, i, subj, want)
			}
		}
	}
}

func cnsOf(certs [][2]string) []string {
	var cns []string
	for _, c := range certs {
		cns = append(cns, c[0])
	}
	return cns
}

// TestLoadWellKnown: Load reads the .wellknown.auth files; a set without
// them has them made of PK.key and KEK.key, the same bytes; without those
// keys, with one file of the two, or with a KEK.pem its KEK.auth does not
// enrol, WellKnownAuth says why; a set without .auth files has none.
func TestLoadWellKnown(t *testing.T) {
	_, files := generate(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	write := func(skip []string, replace map[string][]byte) string { return writeSet(t, files, skip, replace) }
	wk := []string{"KEK" + WellKnownSuffix, "db" + WellKnownSuffix}
	for what, dir := range map[string]string{"read": write(nil, nil), "made": write(wk, nil)} {
		s, err := Load(dir, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.WellKnownAuth()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !bytes.Equal(got["PK"], files["PK.auth"]) || !bytes.Equal(got["KEK"], files["KEK.wellknown.auth"]) || !bytes.Equal(got["db"], files["db.wellknown.auth"]) {
			t.Errorf("%s: WellKnownAuth gave other .auth files", what)
		}
	}
	for what, c := range map[string]struct {
		dir  string
		want string
	}{
		"no PK.key":        {write(append(wk, "PK.key"), nil), "PK.key"},
		"one of two":       {write(wk[1:], nil), "go together"},
		"another KEK":      {write(wk, map[string][]byte{"KEK.key": files["PK.key"], "KEK.pem": files["PK.pem"]}), "KEK.pem is not the certificate KEK.auth enrols"},
		"no .auth files":   {write(append(wk, "PK.auth", "KEK.auth", "db.auth"), nil), "enrols no keys"},
		"damaged KEK.auth": {write(wk, map[string][]byte{"KEK.auth": []byte("short")}), "EFI_VARIABLE_AUTHENTICATION_2"},
	} {
		s, err := Load(c.dir, "")
		if err != nil {
			t.Fatalf("%s: Load: %v", what, err)
		}
		if _, err := s.WellKnownAuth(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: WellKnownAuth said %v, want an error with %q", what, err, c.want)
		}
	}
}
