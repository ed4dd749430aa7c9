package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// SoftHSM is a PKCS#11 token of Debian's softhsm2 made for one test: its
// configuration and token directory are the test's (SOFTHSM2_CONF is set
// for the test), so nothing of the host's tokens is touched.
type SoftHSM struct {
	Module string // the PKCS#11 module, libsofthsm2.so
	Token  string // the token's label
	PIN    string // the user PIN
	util   string
	t      testing.TB
}

// StartSoftHSM initialises an empty token labelled "nodeforge-test".
func StartSoftHSM(t testing.TB) *SoftHSM {
	t.Helper()
	h := &SoftHSM{Token: "nodeforge-test", PIN: "1234", t: t}
	h.util = NeedTool(t, "softhsm2-util")
	h.Module = NeedFile(t, "/usr/lib/softhsm/libsofthsm2.so", "softhsm2")
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n", tokens)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if ts, ok := t.(*testing.T); ok {
		ts.Setenv("SOFTHSM2_CONF", conf)
	} else {
		t.Fatal("StartSoftHSM needs a *testing.T (it sets SOFTHSM2_CONF)")
	}
	h.run("--init-token", "--free", "--label", h.Token, "--pin", h.PIN, "--so-pin", "5678")
	return h
}

// Import puts a PKCS#8 PEM private key on the token, with its public key,
// under label and a one-byte id.
func (h *SoftHSM) Import(keyFile, label string, id byte) {
	h.t.Helper()
	h.run("--import", keyFile, "--token", h.Token, "--label", label, "--id", fmt.Sprintf("%02x", id), "--pin", h.PIN)
}

// URI names a key of the token, with the module and PIN.
func (h *SoftHSM) URI(label string) string {
	return fmt.Sprintf("pkcs11:token=%s;object=%s?module-path=%s&pin-value=%s", h.Token, label, h.Module, h.PIN)
}

func (h *SoftHSM) run(args ...string) {
	h.t.Helper()
	out, err := exec.Command(h.util, args...).CombinedOutput()
	if err != nil {
		h.t.Fatalf("softhsm2-util %v: %v\n%s", args[0], err, out)
	}
}
