package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestCredentialFiles: a bad line is refused naming the file, the line
// and what is wrong with it; only bcrypt hashes are accepted.
func TestCredentialFiles(t *testing.T) {
	good, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	for _, tc := range []struct {
		htpasswd, tokens, says string
	}{
		{"alice:" + string(good) + "\nbob\n", "", "htpasswd F line 2: want USER:HASH"},
		{"alice:$apr1$xyz$abcdefghijklmnopqrstuv\n", "", "line 1 (user alice): the hash is Apache MD5 ($apr1$); only bcrypt"},
		{"\n\nalice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", "", "line 3 (user alice): the hash is SHA-1 ({SHA})"},
		{"alice:$6$salt$hash\n", "", "SHA-512-crypt ($6$)"},
		{"alice:plaintext\n", "", "DES crypt or a password in clear"},
		{"alice:$2y$10$short\n", "", "line 1 (user alice): a broken bcrypt hash"},
		{"alice:" + string(good) + "\nalice:" + string(good) + "\n", "", "line 2: user alice is there twice"},
		{"", "ci\n", "token file T line 1: want NAME:TOKEN or NAME:sha256:HEX"},
		{"", "ci:short\n", "token file T line 1 (ci): the token is shorter than 16 characters"},
		{"", "# none\nci:sha256:abcd\n", "token file T line 2 (ci): after sha256: want 64 hex digits"},
		{"# nobody\n", "", `no login in "`},
	} {
		c := &Credentials{users: map[string][]byte{}}
		err := c.addHtpasswd("F", []byte(tc.htpasswd))
		if err == nil {
			err = c.addTokens("T", []byte(tc.tokens))
		}
		if err == nil && len(c.users)+len(c.tokens) == 0 {
			file := filepath.Join(t.TempDir(), "F")
			os.WriteFile(file, []byte(tc.htpasswd), 0o600)
			_, err = LoadCredentials(file, "")
		}
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q %q: %v, want %q", tc.htpasswd, tc.tokens, err, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), "W6ph5Mm5") {
			t.Errorf("the error shows the hash: %v", err)
		}
	}
	if _, err := LoadCredentials(filepath.Join(t.TempDir(), "missing"), ""); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing file: %v", err)
	}
}
