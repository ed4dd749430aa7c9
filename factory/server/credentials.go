package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Access says who may do what.
type Access struct {
	// Login names the surfaces that need a login; the others are
	// anonymous. Surfaces: build (creating schematics, building what the
	// cache lacks), download (artifacts, schematics, versions, the
	// signing key, the UI), pull (/v2/) and metrics.
	Login []string
	// Credentials are the logins accepted (LoadCredentials); needed when
	// Login names a surface.
	Credentials *Credentials
	// BuildRate bounds the builds one client (its user name, or its
	// address when anonymous) triggers, per minute; 0: no bound.
	BuildRate float64
	// BuildBurst is how many builds a client may trigger at once within
	// BuildRate (0: 1).
	BuildBurst int
	// SchematicRate bounds the new schematics one client stores, per
	// minute (posting one the factory has is not counted); 0: no bound.
	SchematicRate float64
	// SchematicBurst is how many new schematics a client may store at
	// once within SchematicRate (0: 1).
	SchematicBurst int
}

// Credentials are the logins a factory accepts: users of an htpasswd
// file (bcrypt) and named bearer tokens. A token also serves as the
// password of its name in Basic authentication, since a docker
// config.json holds only user:password.
type Credentials struct {
	users  map[string][]byte // user -> bcrypt hash
	tokens []namedToken

	mu       sync.Mutex
	verified map[[32]byte]string // sha256(user, password) bcrypt accepted -> user
}

type namedToken struct {
	name string
	sum  [32]byte // sha256 of the token: the file need not hold it
}

const (
	// minToken is the length of the shortest token accepted in clear.
	minToken = 16
	// maxVerified bounds the logins remembered (bcrypt costs ~0.1 s a
	// check; a registry client sends its login with every request).
	maxVerified = 1024
	// noUserHash is checked when the user is unknown, so that a wrong
	// name takes as long as a wrong password.
	noUserHash = "$2a$10$.fEJRjXXfIVCC43OJIlvCu4tso6oma7l1VDTSGowqtm/12xDbWaPe"
)

// LoadCredentials reads an htpasswd file (USER:BCRYPT-HASH lines, as
// htpasswd -B writes) and a token file (NAME:TOKEN or NAME:sha256:HEX
// lines); either may be "".
func LoadCredentials(htpasswdFile, tokenFile string) (*Credentials, error) {
	c := &Credentials{users: map[string][]byte{}, verified: map[[32]byte]string{}}
	for _, f := range []struct {
		path string
		add  func(string, []byte) error
	}{{htpasswdFile, c.addHtpasswd}, {tokenFile, c.addTokens}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, err
		}
		if err := f.add(f.path, b); err != nil {
			return nil, err
		}
	}
	if len(c.users)+len(c.tokens) == 0 {
		return nil, fmt.Errorf("no login in %q or %q", htpasswdFile, tokenFile)
	}
	return c, nil
}

// lines calls fn with each line of data that is neither blank nor a
// comment, and its number.
func lines(data []byte, fn func(n int, line string) error) error {
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(i+1, line); err != nil {
			return err
		}
	}
	return nil
}

// hashSchemes name the htpasswd hashes other than bcrypt, for refusals.
var hashSchemes = []struct{ prefix, name string }{
	{"$apr1$", "Apache MD5 ($apr1$)"},
	{"{SHA}", "SHA-1 ({SHA})"},
	{"$1$", "MD5-crypt ($1$)"},
	{"$5$", "SHA-256-crypt ($5$)"},
	{"$6$", "SHA-512-crypt ($6$)"},
	{"$y$", "yescrypt ($y$)"},
	{"$", "an unknown scheme"},
}

func (c *Credentials) addHtpasswd(file string, data []byte) error {
	return lines(data, func(n int, line string) error {
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" || hash == "" {
			return fmt.Errorf("htpasswd %s line %d: want USER:HASH", file, n)
		}
		if c.users[user] != nil {
			return fmt.Errorf("htpasswd %s line %d: user %s is there twice", file, n, user)
		}
		if !strings.HasPrefix(hash, "$2y$") && !strings.HasPrefix(hash, "$2a$") && !strings.HasPrefix(hash, "$2b$") {
			scheme := "DES crypt or a password in clear"
			for _, s := range hashSchemes {
				if strings.HasPrefix(hash, s.prefix) {
					scheme = s.name
					break
				}
			}
			return fmt.Errorf("htpasswd %s line %d (user %s): the hash is %s; only bcrypt ($2y$, $2a$, $2b$) is accepted: write it with htpasswd -B", file, n, user, scheme)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return fmt.Errorf("htpasswd %s line %d (user %s): a broken bcrypt hash: %v", file, n, user, err)
		}
		c.users[user] = []byte(hash)
		return nil
	})
}

func (c *Credentials) addTokens(file string, data []byte) error {
	return lines(data, func(n int, line string) error {
		name, secret, ok := strings.Cut(line, ":")
		if !ok || name == "" || secret == "" {
			return fmt.Errorf("token file %s line %d: want NAME:TOKEN or NAME:sha256:HEX", file, n)
		}
		t := namedToken{name: name}
		if hexSum, ok := strings.CutPrefix(secret, "sha256:"); ok {
			b, err := hex.DecodeString(hexSum)
			if err != nil || len(b) != len(t.sum) {
				return fmt.Errorf("token file %s line %d (%s): after sha256: want 64 hex digits", file, n, name)
			}
			copy(t.sum[:], b)
		} else {
			if len(secret) < minToken {
				return fmt.Errorf("token file %s line %d (%s): the token is shorter than %d characters", file, n, name, minToken)
			}
			t.sum = sha256.Sum256([]byte(secret))
		}
		c.tokens = append(c.tokens, t)
		return nil
	})
}

// Basic checks a user's password, or a token of that name.
func (c *Credentials) Basic(user, pass string) (string, bool) {
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	c.mu.Lock()
	known, ok := c.verified[key]
	c.mu.Unlock()
	if ok {
		return known, true
	}
	hash := c.users[user]
	if hash == nil {
		bcrypt.CompareHashAndPassword([]byte(noUserHash), []byte(pass))
	} else if bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil {
		c.remember(key, user)
		return user, true
	}
	return c.Bearer(pass, user)
}

func (c *Credentials) remember(key [32]byte, user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.verified) >= maxVerified {
		clear(c.verified)
	}
	c.verified[key] = user
}

// Bearer finds the token's name (of that name only, when name is set),
// comparing with every token in constant time.
func (c *Credentials) Bearer(tok, name string) (string, bool) {
	sum := sha256.Sum256([]byte(tok))
	found := ""
	for _, t := range c.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 && (name == "" || name == t.name) && found == "" {
			found = t.name
		}
	}
	return found, found != ""
}
