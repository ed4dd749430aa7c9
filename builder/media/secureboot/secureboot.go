// Package secureboot makes and reads the key sets of UEFI Secure Boot: a
// platform key (PK), a key exchange key (KEK) and a signature database
// key (db, which signs the boot loader and the unified kernel images), as
// PEM files, and the EFI signature lists and time-based authenticated
// variables (PK.auth, KEK.auth, db.auth) that enrol them: systemd-boot
// writes the .auth files of loader/keys/auto/ into the firmware when it
// finds the firmware in setup mode. Variants of KEK.auth and db.auth also
// enrol Microsoft's well-known UEFI certificates (wellknown.go).
//
// The formats are UEFI 2.10's (sections 8.2.2 and 32.4), judged by
// efitools' cert-to-efi-sig-list and sign-efi-sig-list, which write the
// same bytes for the same keys and time stamp.
package secureboot

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/nodeforge/builder/attest/authenticode"
	"github.com/nodeforge/builder/attest/pcr"
	"github.com/nodeforge/builder/attest/pkcs11key"
	"github.com/nodeforge/builder/builder/media/gpt"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/sassoftware/relic/v8/lib/pkcs7"
)

// GUIDs of UEFI 2.10.
var (
	globalVariable = gpt.MustParse("8be4df61-93ca-11d2-aa0d-00e098032b8c") // PK, KEK
	imageSecurity  = gpt.MustParse("d719b2cb-3d3a-4596-a3bc-dad00e67656f") // db, dbx
	certX509       = gpt.MustParse("a5c059a1-94e4-4aa7-87b5-ab155c2bf072")
	certPKCS7      = gpt.MustParse("4aafd29d-68df-49ee-8aa9-347d375665a7")
	// ownerNamespace names the owner GUIDs of a key set's signature lists.
	ownerNamespace = gpt.MustParse("6e6f6465-666f-5267-8573-6563626f6f74")
)

// Attributes of the enrolled variables: non-volatile, boot and run time,
// time-based authenticated writes.
const (
	attrs             = 0x01 | 0x02 | 0x04 | 0x20
	winCertRevision2  = 0x0200
	winCertTypeGUID   = 0x0EF1
	rsaBits           = 2048 // what every UEFI implementation must verify
	validity          = 20   // years
	maxKeyFile        = 1 << 20
	efiTimeSize       = 16
	signatureListHead = 28
)

// Names of the variables, in the order systemd-boot enrols them (PK last:
// writing it leaves setup mode).
var Names = []string{"db", "KEK", "PK"}

// Keys is a Secure Boot key set: each key with its self-signed
// certificate, and the key that signs the UKIs' PCR 11 policies.
type Keys struct {
	PK, KEK, DB authenticode.Signer
	PCR         *rsa.PrivateKey
	// Owner is the owner GUID of the signature lists.
	Owner gpt.GUID
}

// Generate makes a new key set: RSA-2048 keys with self-signed
// certificates named "<commonName> PK" and so on, valid from now for 20
// years.
func Generate(commonName string, now time.Time) (*Keys, error) {
	ks := &Keys{}
	for i, k := range []*authenticode.Signer{&ks.PK, &ks.KEK, &ks.DB} {
		key, err := rsa.GenerateKey(rand.Reader, rsaBits)
		if err != nil {
			return nil, err
		}
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial, Subject: pkix.Name{CommonName: commonName + " " + []string{"PK", "KEK", "db"}[i]},
			NotBefore: now.UTC().Truncate(time.Second), NotAfter: now.UTC().AddDate(validity, 0, 0),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		}
		if i == 2 {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, err
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		*k = authenticode.Signer{Key: key, Cert: cert}
	}
	ks.Owner = ownerOf(ks.PK.Cert)
	// TPM2_VerifySignature of every TPM takes RSA-2048.
	key, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return nil, err
	}
	ks.PCR = key
	return ks, nil
}

// ownerOf is the owner GUID of a key set: named by its PK certificate.
func ownerOf(pk *x509.Certificate) gpt.GUID {
	sum := sha256.Sum256(pk.Raw)
	return gpt.NameGUID(ownerNamespace, fmt.Sprintf("%x", sum))
}

// SignatureList is an EFI_SIGNATURE_LIST holding one X.509 certificate
// owned by owner.
func SignatureList(owner gpt.GUID, cert *x509.Certificate) []byte {
	le := binary.LittleEndian
	t := certX509.Mixed()
	o := owner.Mixed()
	b := make([]byte, 0, signatureListHead+16+len(cert.Raw))
	b = append(b, t[:]...)
	b = le.AppendUint32(b, uint32(signatureListHead+16+len(cert.Raw)))
	b = le.AppendUint32(b, 0) // no signature header
	b = le.AppendUint32(b, uint32(16+len(cert.Raw)))
	b = append(b, o[:]...)
	return append(b, cert.Raw...)
}

// Auth is the content of a NAME.auth file: an
// EFI_VARIABLE_AUTHENTICATION_2 descriptor (the time stamp and a PKCS#7
// signature by signer over the variable's name, vendor GUID, attributes,
// time stamp and data) followed by the data, as SetVariable takes it.
func Auth(name string, data []byte, stamp time.Time, signer authenticode.Signer) ([]byte, error) {
	vendor := imageSecurity
	switch name {
	case "PK", "KEK":
		vendor = globalVariable
	case "db", "dbx":
	default:
		return nil, fmt.Errorf("%q is not a Secure Boot variable (PK, KEK, db, dbx)", name)
	}
	ts := efiTime(stamp)
	var signed bytes.Buffer
	for _, u := range utf16.Encode([]rune(name)) {
		binary.Write(&signed, binary.LittleEndian, u)
	}
	v := vendor.Mixed()
	signed.Write(v[:])
	binary.Write(&signed, binary.LittleEndian, uint32(attrs))
	signed.Write(ts)
	signed.Write(data)
	sum := sha256.Sum256(signed.Bytes())
	sd, err := detachedSignedData(signer, sum[:])
	if err != nil {
		return nil, fmt.Errorf("%s.auth: %w", name, err)
	}
	le := binary.LittleEndian
	ct := certPKCS7.Mixed()
	out := append([]byte{}, ts...)
	out = le.AppendUint32(out, uint32(4+2+2+16+len(sd)))
	out = le.AppendUint16(out, winCertRevision2)
	out = le.AppendUint16(out, winCertTypeGUID)
	out = append(out, ct[:]...)
	out = append(out, sd...)
	return append(out, data...), nil
}

// detachedSignedData is the DER of a PKCS#7 SignedData (without the
// ContentInfo around it) by signer over detached data of that SHA-256,
// without signed attributes, as efitools' sign-efi-sig-list writes it:
// relic's builder.
func detachedSignedData(signer authenticode.Signer, digest []byte) ([]byte, error) {
	if signer.Key == nil || signer.Cert == nil {
		return nil, errors.New("no signing key or certificate")
	}
	b := pkcs7.NewBuilder(signer.Key, []*x509.Certificate{signer.Cert}, crypto.SHA256)
	if err := b.SetDetachedContent(pkcs7.OidData, digest); err != nil {
		return nil, err
	}
	sd, err := b.Sign()
	if err != nil {
		return nil, err
	}
	return asn1.Marshal(sd.Content)
}

// efiTime is an EFI_TIME of t in UTC, whole seconds (the descriptor's
// nanoseconds, time zone and daylight fields must be zero).
func efiTime(t time.Time) []byte {
	t = t.UTC()
	b := make([]byte, efiTimeSize)
	binary.LittleEndian.PutUint16(b, uint16(t.Year()))
	b[2], b[3], b[4], b[5], b[6] = byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second())
	return b
}

// AuthFiles are the .auth files that enrol the set, by variable name: db
// signed by KEK, KEK by PK, PK by itself; stamp is their time stamp (the
// firmware refuses an update older than what it holds).
func (ks *Keys) AuthFiles(stamp time.Time) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, v := range []struct {
		name   string
		cert   *x509.Certificate
		signer authenticode.Signer
	}{{"db", ks.DB.Cert, ks.KEK}, {"KEK", ks.KEK.Cert, ks.PK}, {"PK", ks.PK.Cert, ks.PK}} {
		a, err := Auth(v.name, SignatureList(ks.Owner, v.cert), stamp, v.signer)
		if err != nil {
			return nil, err
		}
		files[v.name] = a
	}
	return files, nil
}

// File names of a key set's directory.
const (
	SigningKeyFile  = "db.key" // the db key signs boot loaders and UKIs
	SigningCertFile = "db.pem"
	PCRKeyFile      = "pcr.key" // signs the UKIs' PCR 11 policies
	PCRPublicFile   = "pcr.pub" // its public half, the UKIs' .pcrpkey
)

// Files are the files of a key set's directory: NAME.key (PKCS#8 PEM,
// for the owner only), NAME.pem (the certificate), NAME.esl and
// NAME.auth for PK, KEK and db; KEK.wellknown.auth and db.wellknown.auth
// (the same with Microsoft's well-known certificates added); pcr.key and
// pcr.pub. The .auth files carry the time stamp of the PK certificate's
// start.
func (ks *Keys) Files() (map[string][]byte, error) {
	auth, err := ks.AuthFiles(ks.PK.Cert.NotBefore)
	if err != nil {
		return nil, err
	}
	wellKnown, err := ks.wellKnownAuthFiles(auth)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for name, b := range wellKnown {
		files[name+WellKnownSuffix] = b
	}
	for name, k := range map[string]authenticode.Signer{"PK": ks.PK, "KEK": ks.KEK, "db": ks.DB} {
		der, err := x509.MarshalPKCS8PrivateKey(k.Key)
		if err != nil {
			return nil, err
		}
		files[name+".key"] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		files[name+".pem"] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.Cert.Raw})
		files[name+".esl"] = SignatureList(ks.Owner, k.Cert)
		files[name+".auth"] = auth[name]
	}
	der, err := x509.MarshalPKCS8PrivateKey(ks.PCR)
	if err != nil {
		return nil, err
	}
	files[PCRKeyFile] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	// The same bytes the UKIs carry as .pcrpkey.
	if files[PCRPublicFile], err = pcr.PublicKey(ks.PCR); err != nil {
		return nil, err
	}
	return files, nil
}

// Signing is what media need of a key set: the db key that signs, and the
// .auth files for the ESP's loader/keys/auto/ (none when the directory
// has no .auth files: keys enrolled by other means). Close releases the
// tokens of keys held on PKCS#11 tokens.
type Signing struct {
	Signer authenticode.Signer
	Auth   map[string][]byte // "PK", "KEK", "db"
	// PCR signs the UKIs' PCR 11 policies (.pcrsig): an RSA key, in a
	// file or on a token; nil: the set has no PCR key and the UKIs carry
	// no .pcrsig or .pcrpkey.
	PCR crypto.Signer
	// wellKnown are the KEK and db .auth files with Microsoft's
	// well-known certificates (WellKnownAuth); wellKnownErr says why the
	// set has none.
	wellKnown    map[string][]byte
	wellKnownErr error
	pin          string
	closers      []func() error
}

// CertSHA256 is the fingerprint of the signing certificate: what reports,
// annotations and cache keys name the key set by.
func (s *Signing) CertSHA256() string { return digest.SHA256Hex(s.Signer.Cert.Raw) }

// Close releases the tokens the keys are on (nothing for key files, or
// for no key set).
func (s *Signing) Close() error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// Token files: a key on a PKCS#11 token is named, instead of by db.key or
// pcr.key, by db.pkcs11 or pcr.pkcs11 holding its RFC 7512 URI.
const (
	SigningTokenFile = "db.pkcs11"
	PCRTokenFile     = "pcr.pkcs11"
)

// Load reads a key set's directory for signing: db.pem and the db key
// (db.key, or db.pkcs11 naming it on a token); PK.auth, KEK.auth and
// db.auth when all three are there, with KEK.wellknown.auth and
// db.wellknown.auth (made with PK.key and KEK.key when the set lacks
// them; WellKnownAuth says why when neither can be); the PCR policy key
// (pcr.key or pcr.pkcs11) when there is one. pin is the tokens' PIN when
// their URIs give none.
func Load(dir, pin string) (_ *Signing, err error) {
	s := &Signing{pin: pin}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	certPEM, err := readKeyFile(dir, SigningCertFile)
	if err != nil {
		return nil, fmt.Errorf("Secure Boot keys: %w (builder keys generate --secureboot makes a set)", err)
	}
	if s.Signer, err = s.loadSigner(dir, certPEM); err != nil {
		return nil, err
	}
	auth := map[string][]byte{}
	for _, n := range Names {
		b, err := readKeyFile(dir, n+".auth")
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		auth[n] = b
	}
	switch len(auth) {
	case 0:
	case len(Names):
		s.Auth = auth
		s.wellKnown, s.wellKnownErr = loadWellKnown(dir, auth)
	default:
		return nil, fmt.Errorf("Secure Boot keys in %s: PK.auth, KEK.auth and db.auth go together (found %d of them)", dir, len(auth))
	}
	if s.PCR, err = s.loadPCR(dir); err != nil {
		return nil, err
	}
	return s, nil
}

// loadSigner reads the db key, from its file or its token, and checks it
// against the certificate.
func (s *Signing) loadSigner(dir string, certPEM []byte) (authenticode.Signer, error) {
	uri, err := readKeyFile(dir, SigningTokenFile)
	if errors.Is(err, os.ErrNotExist) {
		keyPEM, err := readKeyFile(dir, SigningKeyFile)
		if err != nil {
			return authenticode.Signer{}, fmt.Errorf("Secure Boot keys: %w (or %s naming the key on a PKCS#11 token)", err, SigningTokenFile)
		}
		signer, err := ParseSigner(keyPEM, certPEM)
		if err != nil {
			return authenticode.Signer{}, fmt.Errorf("Secure Boot keys in %s: %w", dir, err)
		}
		return signer, nil
	} else if err != nil {
		return authenticode.Signer{}, err
	}
	key, err := s.openToken(dir, SigningTokenFile, uri)
	if err != nil {
		return authenticode.Signer{}, err
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return authenticode.Signer{}, fmt.Errorf("Secure Boot keys in %s: %w", dir, err)
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return authenticode.Signer{}, fmt.Errorf("Secure Boot keys in %s: the key %s names does not belong to %s", dir, SigningTokenFile, SigningCertFile)
	}
	return authenticode.Signer{Key: key, Cert: cert}, nil
}

// loadPCR reads the PCR policy key from its file or its token; nil when
// the set has none.
func (s *Signing) loadPCR(dir string) (crypto.Signer, error) {
	uri, err := readKeyFile(dir, PCRTokenFile)
	if err == nil {
		key, err := s.openToken(dir, PCRTokenFile, uri)
		if err != nil {
			return nil, err
		}
		if _, ok := key.Public().(*rsa.PublicKey); !ok {
			return nil, fmt.Errorf("Secure Boot keys: the key %s names is a %T: the PCR policy key must be RSA (what a TPM verifies)", filepath.Join(dir, PCRTokenFile), key.Public())
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b, err := readKeyFile(dir, PCRKeyFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	key, err := parsePCRKey(b)
	if err != nil {
		return nil, fmt.Errorf("Secure Boot keys: %s: %w", filepath.Join(dir, PCRKeyFile), err)
	}
	return key, nil
}

// openToken opens the key a token file's URI names, to be closed with s.
func (s *Signing) openToken(dir, name string, uri []byte) (crypto.Signer, error) {
	text := strings.TrimSpace(string(uri))
	if !pkcs11key.IsURI(text) {
		return nil, fmt.Errorf("Secure Boot keys: %s: not a PKCS#11 URI (pkcs11:token=...;object=...?module-path=...)", filepath.Join(dir, name))
	}
	key, err := pkcs11key.Open(text, s.pin)
	if err != nil {
		return nil, fmt.Errorf("Secure Boot keys: %s: %w", filepath.Join(dir, name), err)
	}
	s.closers = append(s.closers, key.Close)
	return key, nil
}

// readKeyFile reads one file of a key set, refusing what is too large to
// be a key.
func readKeyFile(dir, name string) ([]byte, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, maxKeyFile+1)); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if b.Len() > maxKeyFile {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a key file", f.Name(), maxKeyFile)
	}
	return b.Bytes(), nil
}

// parsePCRKey reads the PCR policy key: RSA, in PEM.
func parsePCRKey(b []byte) (*rsa.PrivateKey, error) {
	key, err := parseKey(b)
	if err != nil {
		return nil, err
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T: the PCR policy key must be RSA (what a TPM verifies)", key)
	}
	return rk, nil
}

// ParseSigner reads a PEM private key (PKCS#8, PKCS#1 or EC) and its PEM
// certificate, and checks that they belong together.
func ParseSigner(keyPEM, certPEM []byte) (authenticode.Signer, error) {
	key, err := parseKey(keyPEM)
	if err != nil {
		return authenticode.Signer{}, err
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return authenticode.Signer{}, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return authenticode.Signer{}, fmt.Errorf("a %T cannot sign", key)
	}
	if !publicKeysEqual(signer.Public(), cert.PublicKey) {
		return authenticode.Signer{}, errors.New("the key does not belong to the certificate")
	}
	return authenticode.Signer{Key: signer, Cert: cert}, nil
}

// parseCert reads a PEM certificate.
func parseCert(certPEM []byte) (*x509.Certificate, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("the certificate file holds no PEM CERTIFICATE")
	}
	return x509.ParseCertificate(cb.Bytes)
}

// publicKeysEqual compares public keys of the standard library's types.
func publicKeysEqual(a, b crypto.PublicKey) bool {
	pub, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(b)
}

// parseKey reads a PEM private key: PKCS#8, PKCS#1 or EC.
func parseKey(keyPEM []byte) (any, error) {
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("the key file holds no PEM block")
	}
	if _, encrypted := kb.Headers["Proc-Type"]; encrypted || kb.Type == "ENCRYPTED PRIVATE KEY" {
		return nil, errors.New("the key is encrypted: give it decrypted (openssl pkey -in KEY -out PLAIN)")
	}
	switch kb.Type {
	case "PRIVATE KEY":
		return x509.ParsePKCS8PrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(kb.Bytes)
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(kb.Bytes)
	}
	return nil, fmt.Errorf("a PEM %q is not a private key", kb.Type)
}
