package secureboot

import (
	"bytes"
	"crypto/x509"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/nodeforge/builder/attest/authenticode"
	"github.com/nodeforge/builder/builder/media/gpt"
)

// Microsoft's UEFI certificate authorities (wellknown/README.md: which,
// whence): what a schematic's secureboot.includeWellKnownCertificates
// enrols besides the key set's own keys, as upstream Talos does, so that
// Microsoft-signed option ROMs and loaders keep running.
//
//go:embed wellknown/kek/*.der wellknown/db/*.der
var wellKnownFS embed.FS

// microsoftOwner owns the well-known certificates' signature lists: the
// GUID Microsoft's own lists carry (and upstream's).
var microsoftOwner = gpt.MustParse("77fa9abd-0359-4d32-bd60-28f4e78f784b")

// wellKnownFiles are the certificates of each variable, in upstream's
// order.
var wellKnownFiles = map[string][]string{
	"KEK": {"kek/microsoft-kek-ca-2011.der", "kek/microsoft-kek-2k-ca-2023.der"},
	"db":  {"db/microsoft-uefi-ca-2011.der", "db/microsoft-option-rom-uefi-ca-2023.der", "db/microsoft-uefi-ca-2023.der"},
}

// WellKnownSuffix names a key set's .auth files that enrol the
// well-known certificates too: KEK.wellknown.auth, db.wellknown.auth.
const WellKnownSuffix = ".wellknown.auth"

// wellKnownNames are the variables the well-known certificates go to,
// each with the key that signs its update.
var wellKnownNames = []struct{ name, signer string }{{"KEK", "PK"}, {"db", "KEK"}}

// WellKnown are the well-known certificates of a variable: KEK or db.
func WellKnown(name string) ([]*x509.Certificate, error) {
	files, ok := wellKnownFiles[name]
	if !ok {
		return nil, fmt.Errorf("no well-known certificates go to %q (KEK, db)", name)
	}
	var certs []*x509.Certificate
	for _, f := range files {
		der, err := wellKnownFS.ReadFile(path.Join("wellknown", f))
		if err != nil {
			return nil, err
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("well-known certificate %s: %w", f, err)
		}
		certs = append(certs, c)
	}
	return certs, nil
}

// WithWellKnown is the .auth file of a variable (KEK or db) that enrols
// what auth, the key set's own .auth file of it, enrols and then the
// well-known certificates, one signature list each, owned by Microsoft:
// with auth's time stamp, signed by signer (PK for KEK, KEK for db).
func WithWellKnown(name string, auth []byte, signer authenticode.Signer) ([]byte, error) {
	certs, err := WellKnown(name)
	if err != nil {
		return nil, err
	}
	stamp, data, err := splitAuth(auth)
	if err != nil {
		return nil, fmt.Errorf("%s.auth: %w", name, err)
	}
	data = bytes.Clone(data)
	for _, c := range certs {
		data = append(data, SignatureList(microsoftOwner, c)...)
	}
	return Auth(name, data, stamp, signer)
}

// splitAuth reads a .auth file: the time stamp of its descriptor and the
// signature lists after it.
func splitAuth(auth []byte) (time.Time, []byte, error) {
	const head = efiTimeSize + 4 + 2 + 2 + 16 // EFI_TIME, WIN_CERTIFICATE_UEFI_GUID's header
	if len(auth) < head {
		return time.Time{}, nil, errors.New("too short for an EFI_VARIABLE_AUTHENTICATION_2")
	}
	le := binary.LittleEndian
	n := int64(le.Uint32(auth[efiTimeSize:]))
	if n < head-efiTimeSize || efiTimeSize+n > int64(len(auth)) || le.Uint16(auth[efiTimeSize+6:]) != winCertTypeGUID {
		return time.Time{}, nil, errors.New("not an EFI_VARIABLE_AUTHENTICATION_2 (time stamp, PKCS#7 signature, signature lists)")
	}
	ts := auth[:efiTimeSize]
	stamp := time.Date(int(le.Uint16(ts)), time.Month(ts[2]), int(ts[3]), int(ts[4]), int(ts[5]), int(ts[6]), 0, time.UTC)
	return stamp, auth[efiTimeSize+n:], nil
}

// wellKnownAuthFiles are the set's KEK and db .auth files with the
// well-known certificates, made of its own .auth files (auth).
func (ks *Keys) wellKnownAuthFiles(auth map[string][]byte) (map[string][]byte, error) {
	signers := map[string]authenticode.Signer{"PK": ks.PK, "KEK": ks.KEK}
	files := map[string][]byte{}
	for _, v := range wellKnownNames {
		b, err := WithWellKnown(v.name, auth[v.name], signers[v.signer])
		if err != nil {
			return nil, err
		}
		files[v.name] = b
	}
	return files, nil
}

// WellKnownAuth are the .auth files for loader/keys/auto/ that enrol the
// set and Microsoft's well-known certificates (a schematic's
// secureboot.includeWellKnownCertificates): PK.auth as Auth's, KEK.auth
// and db.auth with the certificates added.
func (s *Signing) WellKnownAuth() (map[string][]byte, error) {
	switch {
	case s.Auth == nil:
		return nil, errors.New("the Secure Boot key set enrols no keys (no PK.auth, KEK.auth, db.auth): nothing to add the well-known certificates to")
	case s.wellKnownErr != nil:
		return nil, s.wellKnownErr
	case s.wellKnown == nil:
		return nil, errors.New("the Secure Boot key set has no KEK" + WellKnownSuffix + " and db" + WellKnownSuffix)
	}
	return map[string][]byte{"PK": s.Auth["PK"], "KEK": s.wellKnown["KEK"], "db": s.wellKnown["db"]}, nil
}

// loadWellKnown reads the set's KEK.wellknown.auth and db.wellknown.auth
// or, when it has neither, makes them of its .auth files (auth) with
// PK.key and KEK.key: the same bytes builder keys generate writes.
func loadWellKnown(dir string, auth map[string][]byte) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, v := range wellKnownNames {
		b, err := readKeyFile(dir, v.name+WellKnownSuffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		files[v.name] = b
	}
	switch len(files) {
	case len(wellKnownNames):
		return files, nil
	case 0:
	default:
		return nil, fmt.Errorf("Secure Boot keys in %s: KEK%s and db%[2]s go together", dir, WellKnownSuffix)
	}
	for _, v := range wellKnownNames {
		signer, err := loadEnrolledSigner(dir, v.signer, auth[v.signer])
		if err != nil {
			return nil, fmt.Errorf("Secure Boot keys in %s: no KEK%s and db%[2]s, and none can be made: %w", dir, WellKnownSuffix, err)
		}
		if files[v.name], err = WithWellKnown(v.name, auth[v.name], signer); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// loadEnrolledSigner reads NAME.key and NAME.pem (PK or KEK), checking
// that the certificate is the one the set's NAME.auth (auth) enrols.
func loadEnrolledSigner(dir, name string, auth []byte) (authenticode.Signer, error) {
	keyPEM, err := readKeyFile(dir, name+".key")
	if err != nil {
		return authenticode.Signer{}, err
	}
	certPEM, err := readKeyFile(dir, name+".pem")
	if err != nil {
		return authenticode.Signer{}, err
	}
	signer, err := ParseSigner(keyPEM, certPEM)
	if err != nil {
		return authenticode.Signer{}, fmt.Errorf("%s.key: %w", name, err)
	}
	_, data, err := splitAuth(auth)
	if err != nil {
		return authenticode.Signer{}, fmt.Errorf("%s.auth: %w", name, err)
	}
	if !bytes.Contains(data, signer.Cert.Raw) {
		return authenticode.Signer{}, fmt.Errorf("%s.pem is not the certificate %s.auth enrols", name, name)
	}
	return signer, nil
}
