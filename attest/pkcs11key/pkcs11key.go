// Package pkcs11key opens a private key on a PKCS#11 token (a hardware
// security module, a smart card, SoftHSM) named by an RFC 7512 URI, as a
// crypto.Signer: the key never leaves the token, the token signs.
//
// The URI names the module (module-path, or module-name searched in the
// usual directories), the token (token, serial or slot-id), the key
// (object and/or id) and the PIN (pin-value, pin-source=file:/path, or
// else the PIN the caller gives: commands read NODEFORGE_PKCS11_PIN):
//
//	pkcs11:token=nodeforge;object=db?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/nodeforge/pin
//
// Opening needs a builder built with cgo (the module is a shared library
// loaded at run time); without cgo Open says so.
package pkcs11key

import (
	"crypto"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stefanberger/go-pkcs11uri"
)

// PINEnv is the environment variable commands read for the PIN when the
// URI carries neither pin-value nor pin-source.
const PINEnv = "NODEFORGE_PKCS11_PIN"

// Scheme starts every PKCS#11 URI.
const Scheme = "pkcs11:"

// IsURI reports whether s names a key on a token rather than a file.
func IsURI(s string) bool { return strings.HasPrefix(s, Scheme) }

// moduleDirs are searched for module-name when the URI has no module-path
// (Debian's and Fedora's places for PKCS#11 modules).
var moduleDirs = []string{
	"/usr/lib/x86_64-linux-gnu/pkcs11", "/usr/lib/aarch64-linux-gnu/pkcs11",
	"/usr/lib/x86_64-linux-gnu/softhsm", "/usr/lib/softhsm", "/usr/lib64/pkcs11", "/usr/lib/pkcs11", "/usr/lib64",
}

// Key is a private key on a token. Close releases the token's session.
type Key interface {
	crypto.Signer
	Close() error
}

// target is what a URI says to open.
type target struct {
	module      string
	tokenLabel  string
	tokenSerial string
	slot        *int
	pin         string
	id, label   []byte
}

// parse reads a URI into what to open, with errors that name the URI's
// missing or wrong part (never the PIN).
func parse(uri, pin string) (target, error) {
	var t target
	u := pkcs11uri.New()
	if err := u.Parse(uri); err != nil {
		return t, fmt.Errorf("not a PKCS#11 URI (RFC 7512): %w", err)
	}
	u.SetModuleDirectories(moduleDirs)
	u.SetAllowAnyModule(true) // the URI is the operator's configuration
	var err error
	if t.module, err = u.GetModule(); err != nil {
		return t, fmt.Errorf("PKCS#11 module: %w (give module-path=/path/to/module.so)", err)
	}
	t.tokenLabel, _ = u.GetPathAttribute("token", false)
	t.tokenSerial, _ = u.GetPathAttribute("serial", false)
	if s, ok := u.GetPathAttribute("slot-id", false); ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return t, fmt.Errorf("slot-id %q is not a number", s)
		}
		t.slot = &n
	}
	if t.tokenLabel == "" && t.tokenSerial == "" && t.slot == nil {
		return t, errors.New("the URI names no token (token=, serial= or slot-id=)")
	}
	if s, ok := u.GetPathAttribute("object", false); ok {
		t.label = []byte(s)
	}
	if s, ok := u.GetPathAttribute("id", false); ok {
		t.id = []byte(s)
	}
	if t.label == nil && t.id == nil {
		return t, errors.New("the URI names no key (object= or id=)")
	}
	switch {
	case u.HasPIN():
		if t.pin, err = u.GetPIN(); err != nil {
			return t, fmt.Errorf("the token's PIN: %w", err)
		}
		t.pin = strings.TrimRight(t.pin, "\r\n")
	case pin != "":
		t.pin = pin
	default:
		return t, fmt.Errorf("no PIN for the token: give pin-source=file:/path in the URI or set %s", PINEnv)
	}
	return t, nil
}

// describe names the key for messages: the URI without its query (which
// may hold the PIN).
func describe(uri string) string {
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		return uri[:i]
	}
	return uri
}
