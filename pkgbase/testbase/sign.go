package testbase

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KeyFile is the base's signing key (armored OpenPGP public key),
// relative to the spec: the keyring of its repository.
const KeyFile = "keys/boottest.asc"

// signer signs the base as a distribution does: each RPM with rpmsign
// (an RSA v4 header signature) and the repository's repomd.xml with a
// detached signature, by a key made for the base. Signatures are dated
// by the base's source date; the key is new with every base, and its
// public half goes beside the spec.
type signer struct {
	home        string // GNUPGHOME: short, gpg-agent's socket lives there
	env         []string
	fingerprint string
	faked       string
}

const signerName = "Nodeforge boot test"

// newSigner makes the key, dated sde.
func newSigner(sde int64) (*signer, error) {
	for _, tool := range []string{"gpg", "rpmsign"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("testbase: %s signs the base: %w", tool, err)
		}
	}
	home, err := os.MkdirTemp("", "nfgpg-")
	if err != nil {
		return nil, err
	}
	s := &signer{home: home, faked: fmt.Sprintf("--faked-system-time=%d!", sde),
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GNUPGHOME=" + home, "LC_ALL=C", "TZ=UTC"}}
	if _, err := s.gpg("--batch", "--passphrase", "", s.faked, "--quick-gen-key", signerName+" <boottest@nodeforge.invalid>", "rsa2048", "sign", "never"); err != nil {
		s.close()
		return nil, err
	}
	out, err := s.gpg("--with-colons", "--list-secret-keys")
	if err != nil {
		s.close()
		return nil, err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Split(line, ":"); len(f) > 9 && f[0] == "fpr" {
			s.fingerprint = f[9]
			break
		}
	}
	if s.fingerprint == "" {
		s.close()
		return nil, fmt.Errorf("testbase: gpg listed no fingerprint:\n%s", out)
	}
	return s, nil
}

func (s *signer) gpg(args ...string) (string, error) {
	cmd := exec.Command("gpg", append([]string{"--batch", "--no-tty", "--quiet"}, args...)...)
	cmd.Env = s.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testbase: gpg %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// signRPMs adds the header signature to each package.
func (s *signer) signRPMs(files []string) error {
	gpg, _ := exec.LookPath("gpg")
	args := []string{"--addsign", "--define", "__gpg " + gpg, "--define", "_gpg_name " + signerName,
		"--define", "_gpg_sign_cmd_extra_args " + s.faked}
	cmd := exec.Command("rpmsign", append(args, files...)...)
	cmd.Env = s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testbase: rpmsign: %v\n%s", err, out)
	}
	return nil
}

// signFile writes path.asc, an armored detached signature of path.
func (s *signer) signFile(path string) error {
	_, err := s.gpg(s.faked, "--armor", "--detach-sign", "--output", path+".asc", path)
	return err
}

// exportKey writes the armored public key to path.
func (s *signer) exportKey(path string) error {
	out, err := s.gpg("--armor", "--export", s.fingerprint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// close stops gpg's agent and removes the key.
func (s *signer) close() {
	cmd := exec.Command("gpgconf", "--kill", "gpg-agent")
	cmd.Env = s.env
	cmd.Run()
	os.RemoveAll(s.home)
}
