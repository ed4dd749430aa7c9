package pcr

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// testSections are a UKI's measured sections: small stand-ins, the
// computation does not care what they hold.
func testSections(t *testing.T, key *rsa.PrivateKey) map[string][]byte {
	t.Helper()
	pk, err := PublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		".linux":   bytes.Repeat([]byte("kernel "), 1000),
		".osrel":   []byte("ID=nodeforge\nPRETTY_NAME=\"Nodeforge\"\n"),
		".cmdline": []byte("console=ttyS0 talos.platform=metal"),
		".initrd":  bytes.Repeat([]byte{0, 1, 2, 3}, 5000),
		".pcrpkey": pk,
	}
}

// TestAgainstSystemdMeasure: systemd-measure calculate (Debian's systemd,
// the version of the test base's stub) gives the values we compute for
// every phase, from the same section files.
func TestAgainstSystemdMeasure(t *testing.T) {
	measure := testutil.NeedFile(t, "/usr/lib/systemd/systemd-measure", "systemd")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	secs := testSections(t, key)
	dir := t.TempDir()
	args := []string{"calculate", "--bank=sha256", "--json=short"}
	args = append(args, measureArgs(t, dir, secs)...)
	out, err := exec.Command(measure, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-measure calculate: %v\n%s", err, out)
	}
	var got map[string][]struct {
		Phase string `json:"phase"`
		PCR   int    `json:"pcr"`
		Hash  string `json:"hash"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("systemd-measure printed %s: %v", out, err)
	}
	known := []string{".linux", ".osrel", ".cmdline", ".initrd", ".splash", ".dtb", ".pcrpkey"}
	measured := Measure(secs, known)
	if len(got["sha256"]) != len(Phases) {
		t.Fatalf("systemd-measure gave %d values: %s", len(got["sha256"]), out)
	}
	for _, g := range got["sha256"] {
		want := hex.EncodeToString(Phase(measured, g.Phase))
		if g.PCR != Index || g.Hash != want {
			t.Errorf("phase %q: systemd-measure says PCR %d = %s, we %s", g.Phase, g.PCR, g.Hash, want)
		}
	}
}

// TestSignature: every policy of .pcrsig verifies with the public key of
// .pcrpkey, over the policy digest of that phase's value, and names the
// key by its fingerprint.
func TestSignature(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	measured := Measure(testSections(t, key), order)
	sig, err := Signature(measured, key)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string][]entry
	if err := json.Unmarshal(sig, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc["sha256"]) != len(Phases) {
		t.Fatalf("%d policies, want %d", len(doc["sha256"]), len(Phases))
	}
	for i, e := range doc["sha256"] {
		pol := PolicyDigest(Phase(measured, Phases[i]))
		if e.Pol != hex.EncodeToString(pol) || len(e.PCRs) != 1 || e.PCRs[0] != Index {
			t.Errorf("phase %s: policy %s on %v", Phases[i], e.Pol, e.PCRs)
		}
		s, _ := base64.StdEncoding.DecodeString(e.Sig)
		sum := sha256.Sum256(pol)
		if err := rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, sum[:], s); err != nil {
			t.Errorf("phase %s: %v", Phases[i], err)
		}
	}
}

// TestSignAgainstSystemdMeasure: systemd-measure sign (which asks a TPM
// for the policy digest: swtpm here) writes the same .pcrsig as we do,
// byte for byte, for the same sections and key.
func TestSignAgainstSystemdMeasure(t *testing.T) {
	measure := testutil.NeedFile(t, "/usr/lib/systemd/systemd-measure", "systemd")
	sock := testutil.StartSWTPM(t, false)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	secs := testSections(t, key)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "pcr.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"sign", "--tpm2-device=swtpm:path=" + sock, "--bank=sha256", "--json=short", "--private-key=" + keyFile, "--public-key=" + filepath.Join(dir, "pcrpkey")}
	args = append(args, measureArgs(t, dir, secs)...)
	cmd := exec.Command(measure, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	theirs, err := cmd.Output()
	if err != nil {
		t.Fatalf("systemd-measure sign: %v\n%s", err, stderr.Bytes())
	}
	ours, err := Signature(Measure(secs, []string{".linux", ".osrel", ".cmdline", ".initrd", ".pcrpkey"}), key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(theirs), ours) {
		t.Errorf("systemd-measure sign wrote\n%s\nwe\n%s", theirs, ours)
	}
}

// measureArgs writes the sections into dir and returns systemd-measure's
// options naming them, and every phase.
func measureArgs(t *testing.T, dir string, secs map[string][]byte) []string {
	t.Helper()
	var args []string
	for n, d := range secs {
		p := filepath.Join(dir, n[1:])
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--"+n[1:]+"="+p)
	}
	for _, ph := range Phases {
		args = append(args, "--phase="+ph)
	}
	return args
}
