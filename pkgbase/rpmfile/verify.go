package rpmfile

import (
	"crypto"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/nodeforge/builder/pkgbase/cpio"
	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// Check is the outcome of one digest or size check.
type Check struct {
	Name   string `json:"name"` // e.g. "header-sha256", "payload-digest", "md5"
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// SigResult is the outcome of one OpenPGP signature.
type SigResult struct {
	Tag uint32 `json:"tag"`
	// Name says which signature it is, as messages name it, e.g.
	// "header-only RSA/SHA512 signature (RPMTAG_RSAHEADER)".
	Name      string `json:"name"`
	KeyID     string `json:"keyId"`
	Algorithm string `json:"algorithm"`        // e.g. "RSA/SHA256"
	Covers    string `json:"covers"`           // "header" or "header+payload"
	Status    string `json:"status"`           // SigVerified, SigBad, ...
	Verified  bool   `json:"verified"`         // Status == SigVerified
	Signer    string `json:"signer,omitempty"` // fingerprint of the primary key
	Error     string `json:"error,omitempty"`
}

// What became of a signature, with rpm -K's word for it.
const (
	// SigVerified: verified by a key of the keyring (OK).
	SigVerified = "verified"
	// SigBad: unreadable, or a key of the keyring has its key id and it
	// does not verify: the package or the signature changed after
	// signing (BAD).
	SigBad = "bad"
	// SigUnknownKey: made by a key outside the keyring (NOKEY).
	SigUnknownKey = "unknown-key"
	// SigKeyRefused: it verifies, but the key was not valid when it
	// signed (revoked, expired, ...; rpm 4.18 does not judge this: OK).
	SigKeyRefused = "key-refused"
	// SigUnchecked: no keyring was given.
	SigUnchecked = "unchecked"
	// SigUnsupported: its hash algorithm is one rpm does not know; rpm
	// skips such a signature, and so does Err (not listed by rpm -K).
	SigUnsupported = "unsupported"
)

// Verification collects every check made on a package.
type Verification struct {
	Checks     []Check     `json:"checks"`
	Signatures []SigResult `json:"signatures"`
	// PayloadSize is the number of compressed payload bytes read.
	PayloadSize int64 `json:"payloadSize"`
}

// DigestsOK reports whether every digest and size check passed.
func (v *Verification) DigestsOK() bool {
	for _, c := range v.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Err returns nil when the package is intact and, if requireSignature,
// signed by the keyring; otherwise it names every failed check and every
// failed signature with the rule it breaks. rpm -K's rule: every digest
// and every signature must be OK; a good signature does not excuse a bad
// one. A failed digest or a bad signature is tampering and always refuses.
// With requireSignature so does a package without a signature to check,
// and any signature that did not verify for another reason: by a key
// outside the keyring (said so: not tampering), by a key that was not
// valid when it signed, or not checked for want of a keyring. A signature
// with a hash algorithm rpm does not know is skipped, as rpm skips it.
func (v *Verification) Err(requireSignature bool) error {
	var msgs []string
	for _, c := range v.Checks {
		if !c.OK {
			msgs = append(msgs, fmt.Sprintf("%s check failed: %s", c.Name, c.Detail))
		}
	}
	checked := 0
	for _, s := range v.Signatures {
		if s.Status != SigUnsupported {
			checked++
		}
		switch {
		case s.Status == SigBad:
			msgs = append(msgs, fmt.Sprintf("%s is BAD (%s): the package or the signature changed after signing; every signature must verify", s.Name, s.Error))
		case !requireSignature || s.Status == SigVerified || s.Status == SigUnsupported:
		case s.Status == SigUnknownKey:
			msgs = append(msgs, fmt.Sprintf("%s is by key %s, which is not in the keyring (unknown key, not tampering); every signature must be by a key of the keyring", s.Name, s.KeyID))
		default:
			msgs = append(msgs, fmt.Sprintf("%s: %s", s.Name, s.Error))
		}
	}
	if requireSignature && checked == 0 {
		msg := "package is not signed"
		if len(v.Signatures) > 0 {
			msg += " by a signature rpm can check (" + v.Signatures[0].Error + ")"
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// PayloadSigned reports whether a verified signature covers the payload:
// one over header and payload, or one over the header when the header
// carries a payload digest that matched. Without a signed index naming
// the file's hash (verify: packages), that is what makes the payload
// trustworthy.
func (v *Verification) PayloadSigned() bool {
	headerSigned, headerAndPayload := false, false
	for _, s := range v.Signatures {
		if s.Verified {
			headerSigned = true
			headerAndPayload = headerAndPayload || s.Covers == "header+payload"
		}
	}
	if headerAndPayload {
		return true
	}
	for _, c := range v.Checks {
		if c.Name == "payload-digest" && c.OK {
			return headerSigned
		}
	}
	return false
}

// VerifyOptions tunes Verify.
type VerifyOptions struct {
	// Keyring verifies signatures; nil reports them unverified.
	Keyring *keyring.Keyring
	// Entry, when set, is called for each payload entry with its data;
	// the archive is walked so a corrupt payload is caught.
	Entry func(e *cpio.Entry, data io.Reader) error
	// DigestsOnly checks what rpm -K checks (header digests, the
	// compressed payload's digest, size, signatures) without decompressing
	// the payload: no payload-archive check is made and Entry is not
	// called. Locking uses it; the build decompresses and walks the
	// archive anyway.
	DigestsOnly bool
}

type pendingSig struct {
	res  int // index into Signatures
	sig  *keyring.Signature
	hash hash.Hash
}

// Verify reads the rest of the package (the payload) and checks header and
// payload digests, the package size, and every signature. It returns an
// error only when reading fails in a way that prevents the checks; failed
// checks are reported in the Verification.
func (p *Package) Verify(opts VerifyOptions) (*Verification, error) {
	v := &Verification{Checks: []Check{}, Signatures: []SigResult{}}
	sigh, hdr := p.Signature, p.Header

	// Header-only digests; an entry rpm would not read as one fails.
	for _, d := range []struct {
		name string
		tag  uint32
		h    hash.Hash
	}{{"header-sha256", rpmhdr.SigSHA256, sha256.New()}, {"header-sha1", rpmhdr.SigSHA1, sha1.New()}} {
		if err := sigTagErr(sigh, d.tag); err != nil {
			v.Checks = append(v.Checks, Check{Name: d.name, Detail: err.Error()})
		} else if want := sigh.String(d.tag); want != "" {
			v.Checks = append(v.Checks, digestCheck(d.name, d.h, hdr.Raw, want))
		}
	}

	// Writers fed with header+payload and with the payload alone.
	var whole, payloadOnly []io.Writer
	md5h := md5.New()
	md5h.Write(hdr.Raw)
	wantMD5 := ""
	if err := sigTagErr(sigh, rpmhdr.SigMD5); err != nil {
		v.Checks = append(v.Checks, Check{Name: "md5", Detail: err.Error()})
	} else if wantMD5 = hexOrEmpty(sigh.Bytes(rpmhdr.SigMD5)); wantMD5 != "" {
		whole = append(whole, md5h)
	}
	var payDigest hash.Hash
	wantPay := ""
	if d := hdr.Strings(rpmhdr.TagPayloadDigest); len(d) > 0 {
		wantPay = d[0]
		algo := int64(rpmhdr.HashSHA256)
		if a, ok := hdr.Int(rpmhdr.TagPayloadDigestAlgo); ok {
			algo = a
		}
		ch, ok := cryptoHash(uint32(algo))
		if !ok {
			v.Checks = append(v.Checks, Check{Name: "payload-digest", Detail: fmt.Sprintf("unknown digest algorithm %d", algo)})
		} else {
			payDigest = ch.New()
			payloadOnly = append(payloadOnly, payDigest)
		}
	}

	// Signatures: parse each, start its hash.
	pend, sigWhole := v.startSignatures(sigh, hdr)
	whole = append(whole, sigWhole...)

	// Stream the payload once through every hash, walking the archive.
	counter := &countWriter{}
	tee := io.TeeReader(p.payload, io.MultiWriter(append(append(whole, payloadOnly...), counter)...))
	var archiveErr error
	if !opts.DigestsOnly {
		// Corrupt data is caught by the payload's digest, which xz's
		// checks would only repeat (SHA-256 in software, as rpm writes
		// them: a sixth of the decoding time).
		archiveErr = walkPayload(p.Compressor(), hdr, tee, opts.Entry, payDigest != nil)
	}
	if err := drain(tee); err != nil {
		return nil, fmt.Errorf("reading payload: %w", err)
	}
	v.PayloadSize = counter.n
	switch {
	case opts.DigestsOnly:
	case archiveErr != nil:
		v.Checks = append(v.Checks, Check{Name: "payload-archive", Detail: archiveErr.Error()})
	default:
		v.Checks = append(v.Checks, Check{Name: "payload-archive", OK: true})
	}
	if payDigest != nil {
		got := hex.EncodeToString(payDigest.Sum(nil))
		v.Checks = append(v.Checks, cmpCheck("payload-digest", got, wantPay))
	}
	if wantMD5 != "" {
		v.Checks = append(v.Checks, cmpCheck("md5", hex.EncodeToString(md5h.Sum(nil)), wantMD5))
	}
	size := int64(len(hdr.Raw)) + counter.n
	if want, ok := sigh.Int(rpmhdr.SigLongSize); ok {
		v.Checks = append(v.Checks, sizeCheck(size, want))
	} else if want, ok := sigh.Int(rpmhdr.SigSize); ok {
		v.Checks = append(v.Checks, sizeCheck(size, want))
	}

	v.checkSignatures(pend, opts.Keyring)
	return v, nil
}

// startSignatures parses the package's signatures into v and starts the
// hash of each over the header; those that also cover the payload are
// returned in whole, to be fed with it.
func (v *Verification) startSignatures(sigh, hdr *rpmhdr.Header) (pend []pendingSig, whole []io.Writer) {
	addSig := func(tag uint32, raw []byte, covers string) {
		r := SigResult{Tag: tag, Covers: covers, Status: SigBad, Name: sigName(tag, covers, "")}
		s, err := keyring.ParsePackageSignature(raw)
		switch {
		case errors.Is(err, keyring.ErrUnsupportedHash):
			r.Status, r.Error = SigUnsupported, err.Error()
		case err != nil:
			r.Error = "unreadable signature: " + err.Error()
		case s.Type != 0:
			r.Error = fmt.Sprintf("signature type %#x is not a signature of binary data, the only kind rpm takes", s.Type)
		}
		if s == nil || r.Error != "" {
			v.Signatures = append(v.Signatures, r)
			return
		}
		r.KeyID = s.KeyIDHex()
		r.Algorithm = s.Algorithm + "/" + hashName(s.Hash)
		r.Name = sigName(tag, covers, r.Algorithm)
		h, err := s.NewHash()
		if err != nil {
			r.Status, r.Error = SigUnsupported, err.Error()
			v.Signatures = append(v.Signatures, r)
			return
		}
		h.Write(hdr.Raw)
		v.Signatures = append(v.Signatures, r)
		pend = append(pend, pendingSig{res: len(v.Signatures) - 1, sig: s, hash: h})
		if covers == "header+payload" {
			whole = append(whole, h)
		}
	}
	// An entry rpm would not read as a signature (wrong type) is a bad one.
	legacy := func(tag uint32, covers string) {
		if err := sigTagErr(sigh, tag); err != nil {
			v.Signatures = append(v.Signatures, SigResult{Tag: tag, Name: sigName(tag, covers, ""), Covers: covers, Status: SigBad, Error: err.Error()})
		} else if b := sigh.Bytes(tag); b != nil {
			addSig(tag, b, covers)
		}
	}
	legacy(rpmhdr.SigRSA, "header")
	legacy(rpmhdr.SigDSA, "header")
	for _, s := range sigh.Strings(rpmhdr.SigOpenPGP) {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			addSig(rpmhdr.SigOpenPGP, b, "header")
		} else {
			v.Signatures = append(v.Signatures, SigResult{Tag: rpmhdr.SigOpenPGP, Name: sigName(rpmhdr.SigOpenPGP, "header", ""), Covers: "header", Status: SigBad, Error: "signature is not base64"})
		}
	}
	legacy(rpmhdr.SigPGP, "header+payload")
	legacy(rpmhdr.SigGPG, "header+payload")

	return pend, whole
}

// checkSignatures checks each started signature against the keyring.
func (v *Verification) checkSignatures(pend []pendingSig, kr *keyring.Keyring) {
	for _, ps := range pend {
		r := &v.Signatures[ps.res]
		if kr == nil || kr.Len() == 0 {
			r.Status, r.Error = SigUnchecked, "not checked: no keyring given"
			continue
		}
		fp, err := kr.Verify(ps.sig, ps.hash)
		switch {
		case err == nil:
			r.Status, r.Verified, r.Signer = SigVerified, true, fp
			continue
		case errors.Is(err, keyring.ErrUnknownKey):
			r.Status = SigUnknownKey
		case errors.Is(err, keyring.ErrBadSignature):
			r.Status = SigBad
		default: // the key's validity rules
			r.Status = SigKeyRefused
		}
		r.Error = err.Error()
	}
}

// sigTagNames are rpm's names of the tags that hold signatures.
var sigTagNames = map[uint32]string{
	rpmhdr.SigRSA: "RPMTAG_RSAHEADER", rpmhdr.SigDSA: "RPMTAG_DSAHEADER", rpmhdr.SigOpenPGP: "RPMTAG_OPENPGP",
	rpmhdr.SigPGP: "RPMSIGTAG_PGP", rpmhdr.SigGPG: "RPMSIGTAG_GPG",
}

// sigName names a signature by what it covers, its algorithm and the tag
// that holds it, as rpm's tag names say.
func sigName(tag uint32, covers, algorithm string) string {
	kind := "header-only"
	if covers == "header+payload" {
		kind = covers
	}
	if algorithm != "" {
		kind += " " + algorithm
	}
	return fmt.Sprintf("%s signature (%s)", kind, sigTagNames[tag])
}

func walkPayload(compressor string, hdr *rpmhdr.Header, r io.Reader, fn func(*cpio.Entry, io.Reader) error, digested bool) error {
	dr, err := decompress(compressor, r, digested)
	if err != nil {
		return err
	}
	defer dr.Close()
	cr := cpio.NewReader(dr)
	cr.Stripped = strippedEntries(hdr)
	for {
		e, err := cr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if fn != nil {
			if err := fn(e, cr); err != nil {
				return fmt.Errorf("%s: %w", e.Name, err)
			}
		}
	}
}

// drain reads r to its end in large reads (io.Copy to io.Discard would
// read 8 KiB at a time, a hash call each).
func drain(r io.Reader) error {
	buf := make([]byte, 256<<10)
	for {
		_, err := r.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func digestCheck(name string, h hash.Hash, data []byte, want string) Check {
	h.Write(data)
	return cmpCheck(name, hex.EncodeToString(h.Sum(nil)), want)
}

func cmpCheck(name, got, want string) Check {
	if strings.EqualFold(got, want) {
		return Check{Name: name, OK: true}
	}
	return Check{Name: name, Detail: fmt.Sprintf("expected %s, computed %s", want, got)}
}

func sizeCheck(got, want int64) Check {
	if got == want {
		return Check{Name: "size", OK: true}
	}
	return Check{Name: "size", Detail: fmt.Sprintf("header+payload is %d bytes, signature header says %d", got, want)}
}

func cryptoHash(algo uint32) (crypto.Hash, bool) {
	switch algo {
	case rpmhdr.HashMD5:
		return crypto.MD5, true
	case rpmhdr.HashSHA1:
		return crypto.SHA1, true
	case rpmhdr.HashSHA256:
		return crypto.SHA256, true
	case rpmhdr.HashSHA384:
		return crypto.SHA384, true
	case rpmhdr.HashSHA512:
		return crypto.SHA512, true
	case rpmhdr.HashSHA224:
		return crypto.SHA224, true
	}
	return 0, false
}

func hashName(h crypto.Hash) string {
	switch h {
	case crypto.MD5:
		return "MD5"
	case crypto.SHA1:
		return "SHA1"
	case crypto.SHA224:
		return "SHA224"
	case crypto.SHA256:
		return "SHA256"
	case crypto.SHA384:
		return "SHA384"
	case crypto.SHA512:
		return "SHA512"
	}
	return h.String()
}
