// Package keyring loads OpenPGP public keys and verifies the signatures that
// RPM packages and apt-rpm release files carry: v4 packets (RSA, DSA, EdDSA,
// ECDSA, made by a primary key or a subkey) and the v3 packets of older
// rpmsign (RSA and DSA), which the OpenPGP library no longer parses. A
// signature counts only if the key that made it was valid (not revoked, not
// expired, already created, allowed to sign) when it was made.
package keyring

import (
	"bytes"
	"crypto"
	"crypto/dsa" //nolint:staticcheck // v3 DSA signatures of CentOS 3-5 era packages
	"crypto/rsa"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/big"
	"os"
	"sort"
	"time"

	// Hashes a signature may name; registering them makes crypto.Hash.New work.
	_ "crypto/md5"
	_ "crypto/sha1"
	_ "crypto/sha256"
	_ "crypto/sha512"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Keyring is a set of trusted public keys.
type Keyring struct {
	entities openpgp.EntityList
}

// Load reads armored or binary public keys from files. Each file may hold
// several keys.
func Load(paths ...string) (*Keyring, error) {
	k := &Keyring{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("keyring: %w", err)
		}
		if err := k.Add(b); err != nil {
			return nil, fmt.Errorf("keyring %s: %w", p, err)
		}
	}
	return k, nil
}

// Add parses armored or binary keys and adds them.
func (k *Keyring) Add(b []byte) error {
	var el openpgp.EntityList
	var err error
	if bytes.Contains(b, []byte("-----BEGIN PGP")) {
		el, err = readArmoredBlocks(b)
	} else {
		el, err = openpgp.ReadKeyRing(bytes.NewReader(b))
	}
	if err != nil {
		return err
	}
	if len(el) == 0 {
		return errors.New("no public keys found")
	}
	k.entities = append(k.entities, el...)
	return nil
}

// readArmoredBlocks reads every armored key block of a file (key files often
// concatenate several).
func readArmoredBlocks(b []byte) (openpgp.EntityList, error) {
	var all openpgp.EntityList
	for {
		i := bytes.Index(b, []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----"))
		if i < 0 {
			break
		}
		b = b[i:]
		blk, err := armor.Decode(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("armor: %w", err)
		}
		el, err := openpgp.ReadKeyRing(blk.Body)
		if err != nil {
			return nil, err
		}
		all = append(all, el...)
		b = b[len("-----BEGIN PGP PUBLIC KEY BLOCK-----"):]
	}
	if len(all) == 0 {
		return nil, errors.New("no armored public key block")
	}
	return all, nil
}

// Len is the number of primary keys.
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	return len(k.entities)
}

// Fingerprints returns the upper-case hex fingerprints of the primary keys, sorted.
func (k *Keyring) Fingerprints() []string {
	if k == nil {
		return nil
	}
	var out []string
	for _, e := range k.entities {
		out = append(out, fingerprint(e.PrimaryKey))
	}
	sort.Strings(out)
	return out
}

// Signature is one parsed signature packet, v3 or v4.
type Signature struct {
	Version    int
	KeyID      uint64
	Algorithm  string // "RSA", "DSA", "EdDSA", ...
	Hash       crypto.Hash
	Created    time.Time // the signature's creation time, which key validity is judged at
	Type       byte      // the signature type: 0 over binary data
	v4         *packet.Signature
	v3         *v3sig
	HashSuffix []byte // v3 only: bytes hashed after the data
}

type v3sig struct {
	sigType  byte
	created  uint32
	pubAlgo  packet.PublicKeyAlgorithm
	hashTag  [2]byte
	rsaSig   []byte
	dsaR     *big.Int
	dsaS     *big.Int
	hashAlgo byte
}

// KeyIDHex is the 16-digit hex key id.
func (s *Signature) KeyIDHex() string { return fmt.Sprintf("%016x", s.KeyID) }

// NewHash returns a fresh hash for the data the signature covers.
func (s *Signature) NewHash() (hash.Hash, error) {
	if !s.Hash.Available() {
		return nil, fmt.Errorf("signature hash algorithm %v not available", s.Hash)
	}
	return s.Hash.New(), nil
}

// ParseSignature reads one binary or armored signature packet.
func ParseSignature(b []byte) (*Signature, error) {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("-----BEGIN PGP SIGNATURE-----")) {
		blk, err := armor.Decode(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("signature armor: %w", err)
		}
		b, err = io.ReadAll(io.LimitReader(blk.Body, 1<<20))
		if err != nil {
			return nil, fmt.Errorf("signature armor: %w", err)
		}
	}
	body, tag, _, err := packetBody(b)
	if err != nil {
		return nil, err
	}
	if tag != 2 {
		return nil, fmt.Errorf("packet tag %d is not a signature", tag)
	}
	if len(body) > 0 && (body[0] == 3 || body[0] == 2) {
		return parseV3(body)
	}
	p, err := packet.Read(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("signature packet: %w", err)
	}
	sig, ok := p.(*packet.Signature)
	if !ok {
		return nil, fmt.Errorf("packet is %T, not a signature", p)
	}
	s := &Signature{Version: sig.Version, Hash: sig.Hash, Created: sig.CreationTime, Type: byte(sig.SigType), v4: sig, Algorithm: algoName(sig.PubKeyAlgo)}
	if sig.IssuerKeyId != nil {
		s.KeyID = *sig.IssuerKeyId
	} else if len(sig.IssuerFingerprint) >= 8 {
		s.KeyID = binary.BigEndian.Uint64(sig.IssuerFingerprint[len(sig.IssuerFingerprint)-8:])
	}
	return s, nil
}

// packetBody splits the first OpenPGP packet (old or new format header);
// size is the whole packet's.
func packetBody(b []byte) (body []byte, tag, size int, err error) {
	if len(b) < 2 || b[0]&0x80 == 0 {
		return nil, 0, 0, errors.New("not an OpenPGP packet")
	}
	var n, hl int
	if b[0]&0x40 == 0 { // old format
		tag = int(b[0]>>2) & 0xf
		switch b[0] & 3 {
		case 0:
			n, hl = int(b[1]), 2
		case 1:
			if len(b) < 3 {
				return nil, 0, 0, errors.New("truncated packet header")
			}
			n, hl = int(binary.BigEndian.Uint16(b[1:])), 3
		case 2:
			if len(b) < 5 {
				return nil, 0, 0, errors.New("truncated packet header")
			}
			n, hl = int(binary.BigEndian.Uint32(b[1:])), 5
		default:
			n, hl = len(b)-1, 1
		}
	} else {
		tag = int(b[0] & 0x3f)
		switch {
		case b[1] < 192:
			n, hl = int(b[1]), 2
		case b[1] < 224:
			if len(b) < 3 {
				return nil, 0, 0, errors.New("truncated packet header")
			}
			n, hl = (int(b[1])-192)<<8+int(b[2])+192, 3
		case b[1] == 255:
			if len(b) < 6 {
				return nil, 0, 0, errors.New("truncated packet header")
			}
			n, hl = int(binary.BigEndian.Uint32(b[2:])), 6
		default:
			return nil, 0, 0, errors.New("partial-length signature packets are not supported")
		}
	}
	if n < 0 || hl+n > len(b) {
		return nil, 0, 0, fmt.Errorf("packet length %d exceeds the %d bytes present", n, len(b)-hl)
	}
	return b[hl : hl+n], tag, hl + n, nil
}

func readMPI(b []byte) (*big.Int, []byte, error) {
	if len(b) < 2 {
		return nil, nil, errors.New("truncated MPI")
	}
	bits := int(binary.BigEndian.Uint16(b))
	n := (bits + 7) / 8
	if len(b) < 2+n {
		return nil, nil, errors.New("truncated MPI")
	}
	return new(big.Int).SetBytes(b[2 : 2+n]), b[2+n:], nil
}

// parseV3 reads a v3 signature (RFC 4880 5.2.2).
func parseV3(b []byte) (*Signature, error) {
	if len(b) < 19 || b[1] != 5 {
		return nil, errors.New("malformed v3 signature packet")
	}
	v := &v3sig{
		sigType:  b[2],
		created:  binary.BigEndian.Uint32(b[3:]),
		pubAlgo:  packet.PublicKeyAlgorithm(b[15]),
		hashAlgo: b[16],
	}
	copy(v.hashTag[:], b[17:19])
	s := &Signature{Version: int(b[0]), KeyID: binary.BigEndian.Uint64(b[7:15]), Created: time.Unix(int64(v.created), 0).UTC(), Type: v.sigType, v3: v, Algorithm: algoName(v.pubAlgo)}
	var ok bool
	s.Hash, ok = hashFromID(v.hashAlgo)
	if !ok {
		return nil, fmt.Errorf("v3 signature: %w %d", ErrUnsupportedHash, v.hashAlgo)
	}
	rest := b[19:]
	var err error
	switch v.pubAlgo {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSASignOnly:
		var m *big.Int
		if m, _, err = readMPI(rest); err != nil {
			return nil, err
		}
		v.rsaSig = m.Bytes()
	case packet.PubKeyAlgoDSA:
		if v.dsaR, rest, err = readMPI(rest); err != nil {
			return nil, err
		}
		if v.dsaS, _, err = readMPI(rest); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("v3 signature with public key algorithm %d is not supported", v.pubAlgo)
	}
	s.HashSuffix = []byte{v.sigType, byte(v.created >> 24), byte(v.created >> 16), byte(v.created >> 8), byte(v.created)}
	return s, nil
}

func hashFromID(id byte) (crypto.Hash, bool) {
	switch id {
	case 1:
		return crypto.MD5, true
	case 2:
		return crypto.SHA1, true
	case 8:
		return crypto.SHA256, true
	case 9:
		return crypto.SHA384, true
	case 10:
		return crypto.SHA512, true
	case 11:
		return crypto.SHA224, true
	}
	return 0, false
}

func algoName(a packet.PublicKeyAlgorithm) string {
	switch a {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSASignOnly:
		return "RSA"
	case packet.PubKeyAlgoDSA:
		return "DSA"
	case packet.PubKeyAlgoECDSA:
		return "ECDSA"
	case packet.PubKeyAlgoEdDSA:
		return "EdDSA"
	case packet.PubKeyAlgoEd25519:
		return "Ed25519"
	case packet.PubKeyAlgoEd448:
		return "Ed448"
	}
	return fmt.Sprintf("algo%d", a)
}

// ErrUnknownKey means no key of the keyring has the signature's key id.
var ErrUnknownKey = errors.New("signed by a key that is not in the keyring")

// ErrBadSignature means a key of the keyring has the signature's key id but
// the signature does not verify: the data or the signature changed after
// signing (rpm's BAD, where ErrUnknownKey is its NOKEY).
var ErrBadSignature = errors.New("does not verify")

// Verify checks s over the data already written into h (from s.NewHash).
// It returns the fingerprint of the primary key whose key (or subkey) made
// the signature. The error wraps ErrBadSignature when the digest of the
// data does not begin with the two bytes the signature carries (checked
// first, as rpm does, so changed data is told apart from an unknown key),
// ErrUnknownKey when no key of the keyring has the signature's key id, and
// ErrBadSignature when one has and the signature does not verify.
//
// A signature that verifies is accepted only if the key that made it was
// valid when the signature was made (s.Created), never judged against the
// current time: a package base is verified long after its keys were minted,
// and a key that has expired since is fine. Refused, with an error that
// wraps ErrKeyRevoked, ErrKeyExpired, ErrKeyNotYetValid or
// ErrKeyNotForSigning and names the rule:
//   - a revoked primary key (and so all its subkeys) or subkey, whatever
//     the date and reason of the revocation, and whichever copy of the key
//     in the keyring carries it: revocation always wins;
//   - a primary key or subkey that had expired when the signature was made,
//     or whose self-signature or binding signature had;
//   - a signature made before the primary key or subkey was created;
//   - a key whose key flags lack the signing flag, and a signing subkey
//     without a valid cross-signature (primary key binding) by the subkey.
//     Keys without key flags (CentOS 2-4) sign if their algorithm can.
//
// Subkey binding and revocation signatures were checked when the key was
// read (a key with an invalid one is not loaded).
func (k *Keyring) Verify(s *Signature, h hash.Hash) (string, error) {
	if k == nil || len(k.entities) == 0 {
		return "", errors.New("no keyring given")
	}
	// rpm's quick check comes first, key or no key: the signature holds
	// the first two bytes of the digest it signs. Data that differs is
	// tampering even when the key is unknown.
	if hh := cloneHash(h, s.Hash); hh != nil {
		hh.Write(s.hashSuffix())
		if sum, tag := hh.Sum(nil), s.hashTag(); sum[0] != tag[0] || sum[1] != tag[1] {
			return "", fmt.Errorf("signature by key %s %w: the data differs from what was signed (hash tag %x, computed %x)", s.KeyIDHex(), ErrBadSignature, tag, sum[:2])
		}
	}
	keys := k.entities.KeysById(s.KeyID)
	if len(keys) == 0 {
		return "", fmt.Errorf("%w (key id %s)", ErrUnknownKey, s.KeyIDHex())
	}
	var lastErr, refused error
	consumed := false
	for i, key := range keys {
		if consumed {
			break
		}
		// A check consumes the hash state: keep it for the next key.
		hh := h
		if i < len(keys)-1 {
			if c := cloneHash(h, s.Hash); c != nil {
				hh = c
			}
		}
		consumed = hh == h
		var err error
		if s.v3 != nil {
			err = verifyV3(key.PublicKey, s, hh)
		} else {
			err = key.PublicKey.VerifySignature(hh, s.v4)
		}
		if err != nil {
			lastErr = err
			continue
		}
		// The signature is good; the key must have been valid when it was made.
		if err := k.validAt(key, s.Created); err != nil {
			refused = err
			continue
		}
		return fingerprint(key.Entity.PrimaryKey), nil
	}
	if refused != nil {
		return "", fmt.Errorf("signature by key %s refused: %w", s.KeyIDHex(), refused)
	}
	return "", fmt.Errorf("signature by key %s %w: %v", s.KeyIDHex(), ErrBadSignature, lastErr)
}

func verifyV3(pk *packet.PublicKey, s *Signature, h hash.Hash) error {
	h.Write(s.HashSuffix)
	sum := h.Sum(nil)
	if sum[0] != s.v3.hashTag[0] || sum[1] != s.v3.hashTag[1] {
		return errors.New("hash tag does not match (data differs from what was signed)")
	}
	switch pub := pk.PublicKey.(type) {
	case *rsa.PublicKey:
		if s.v3.rsaSig == nil {
			return errors.New("key is RSA, signature is not")
		}
		sig := s.v3.rsaSig
		if k := (pub.N.BitLen() + 7) / 8; len(sig) < k {
			sig = append(make([]byte, k-len(sig)), sig...)
		}
		if err := rsa.VerifyPKCS1v15(pub, s.Hash, sum, sig); err != nil {
			return errors.New("RSA verification failure")
		}
		return nil
	case *dsa.PublicKey:
		if s.v3.dsaR == nil {
			return errors.New("key is DSA, signature is not")
		}
		if n := (pub.Q.BitLen() + 7) / 8; len(sum) > n {
			sum = sum[:n]
		}
		if !dsa.Verify(pub, sum, s.v3.dsaR, s.v3.dsaS) {
			return errors.New("DSA verification failure")
		}
		return nil
	}
	return fmt.Errorf("v3 signature with key type %T is not supported", pk.PublicKey)
}

// VerifyDetached verifies an armored or binary detached signature over data
// and returns the signing primary key's fingerprint.
func (k *Keyring) VerifyDetached(data, sig []byte) (string, error) {
	s, err := ParseSignature(sig)
	if err != nil {
		return "", err
	}
	h, err := s.NewHash()
	if err != nil {
		return "", err
	}
	if s.v4 != nil && s.v4.SigType == packet.SigTypeText {
		data = canonicalText(data)
	}
	h.Write(data)
	return k.Verify(s, h)
}

// canonicalText converts line endings to CRLF, as text signatures require.
func canonicalText(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
}

// ArmoredPublic is the armored public key of e, as keyring files hold it.
func ArmoredPublic(e *openpgp.Entity) ([]byte, error) {
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, err
	}
	if err := e.Serialize(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}
