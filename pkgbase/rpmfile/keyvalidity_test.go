package rpmfile

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/eddsa"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/google/rpmpack"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// Keys and signatures of these tests are made at fixed dates long past, so
// "now" is after every expiry: validity is judged when a package was signed.
var vt0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func vcfg(at time.Time, algo packet.PublicKeyAlgorithm) *packet.Config {
	no := false
	return &packet.Config{
		Algorithm:                             algo,
		DefaultHash:                           crypto.SHA256,
		Time:                                  func() time.Time { return at },
		NonDeterministicSignaturesViaNotation: &no,
	}
}

// vkey is one key of a test certificate and what its self-signatures say.
type vkey struct {
	priv    *packet.PrivateKey
	life    time.Duration // 0: does not expire
	revoked time.Time     // zero: not revoked
	reason  packet.ReasonForRevocation
	text    string
}

// vcert is a certificate: a primary key and its signing subkeys. It is
// written by hand from go-crypto's key material because go-crypto marks the
// key expiration, embedded signature and revocation reason subpackets
// critical, and rpm 4.18, which does not know them, then refuses to import
// the key. Here only the creation time is critical.
type vcert struct {
	primary vkey
	subs    []*vkey
}

func newPriv(t *testing.T, algo packet.PublicKeyAlgorithm, at time.Time, subkey bool) *packet.PrivateKey {
	t.Helper()
	var priv *packet.PrivateKey
	if algo == packet.PubKeyAlgoRSA {
		k, err := rsa.GenerateKey(rand.Reader, 1024) // fast; rpm and go-crypto take it
		if err != nil {
			t.Fatal(err)
		}
		priv = packet.NewRSAPrivateKey(at, k)
	} else {
		// go-crypto's EdDSA curve type is internal: take a new entity's key.
		e, err := openpgp.NewEntity("k", "", "", vcfg(at, algo))
		if err != nil {
			t.Fatal(err)
		}
		priv = e.PrivateKey
	}
	priv.IsSubkey = subkey
	return priv
}

// subpacket is a non-critical signature subpacket (typ|0x80 for critical).
func subpacket(typ byte, body ...byte) []byte {
	n := len(body) + 1
	var out []byte
	if n < 192 {
		out = []byte{byte(n)}
	} else {
		n -= 192
		out = []byte{byte(n>>8) + 192, byte(n)}
	}
	return append(append(out, typ), body...)
}

// framed is a new-format OpenPGP packet.
func framed(tag byte, body []byte) []byte {
	out := []byte{0xc0 | tag}
	switch n := len(body); {
	case n < 192:
		out = append(out, byte(n))
	case n < 8384:
		n -= 192
		out = append(out, byte(n>>8)+192, byte(n))
	default:
		out = binary.BigEndian.AppendUint32(append(out, 0xff), uint32(n))
	}
	return append(out, body...)
}

func mpi(b []byte) []byte {
	b = bytes.TrimLeft(b, "\x00")
	n := 0
	if len(b) > 0 {
		n = (len(b)-1)*8 + bits.Len8(b[0])
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(n)), b...)
}

// sigBody is the body of a v4 signature by signer, dated at, over what
// prefix writes, with the extra hashed subpackets.
func sigBody(t *testing.T, signer *packet.PrivateKey, typ packet.SignatureType, at time.Time, prefix func(io.Writer), extra ...[]byte) []byte {
	t.Helper()
	hashed := subpacket(2|0x80, binary.BigEndian.AppendUint32(nil, uint32(at.Unix()))...)
	hashed = append(hashed, subpacket(33, append([]byte{4}, signer.Fingerprint...)...)...)
	for _, e := range extra {
		hashed = append(hashed, e...)
	}
	head := []byte{4, byte(typ), byte(signer.PubKeyAlgo), 8 /* SHA256 */}
	head = append(binary.BigEndian.AppendUint16(head, uint16(len(hashed))), hashed...)
	h := sha256.New()
	prefix(h)
	h.Write(head)
	h.Write(binary.BigEndian.AppendUint32([]byte{4, 0xff}, uint32(len(head))))
	digest := h.Sum(nil)
	unhashed := subpacket(16, binary.BigEndian.AppendUint64(nil, signer.KeyId)...)
	body := append(binary.BigEndian.AppendUint16(head, uint16(len(unhashed))), unhashed...)
	body = append(body, digest[0], digest[1])
	switch k := signer.PrivateKey.(type) {
	case *rsa.PrivateKey:
		s, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest)
		if err != nil {
			t.Fatal(err)
		}
		body = append(body, mpi(s)...)
	case *eddsa.PrivateKey:
		r, s, err := eddsa.Sign(k, digest)
		if err != nil {
			t.Fatal(err)
		}
		body = append(append(body, mpi(r)...), mpi(s)...)
	default:
		t.Fatalf("key type %T", k)
	}
	return body
}

func (k *vkey) extra(flags byte) [][]byte {
	out := [][]byte{subpacket(27, flags)}
	if k.life > 0 {
		out = append(out, subpacket(9, binary.BigEndian.AppendUint32(nil, uint32(k.life/time.Second))...))
	}
	return out
}

func (k *vkey) revocationReason() []byte {
	return subpacket(29, append([]byte{byte(k.reason)}, k.text...)...)
}

// armored is the certificate as a keyring file holds it.
func (c *vcert) armored(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	p := c.primary.priv
	p.PublicKey.Serialize(&b)
	primary := func(w io.Writer) { p.PublicKey.SerializeForHash(w) }
	if !c.primary.revoked.IsZero() {
		b.Write(framed(2, sigBody(t, p, packet.SigTypeKeyRevocation, c.primary.revoked, primary, c.primary.revocationReason())))
	}
	uid := []byte("rpm validity test <validity@example.org>")
	b.Write(framed(13, uid))
	b.Write(framed(2, sigBody(t, p, packet.SigTypePositiveCert, p.CreationTime, func(w io.Writer) {
		primary(w)
		w.Write(binary.BigEndian.AppendUint32([]byte{0xb4}, uint32(len(uid))))
		w.Write(uid)
	}, c.primary.extra(0x03)...)))
	for _, s := range c.subs {
		sp := s.priv
		sp.PublicKey.Serialize(&b)
		both := func(w io.Writer) { primary(w); sp.PublicKey.SerializeForHash(w) }
		back := sigBody(t, sp, packet.SigTypePrimaryKeyBinding, sp.CreationTime, both)
		b.Write(framed(2, sigBody(t, p, packet.SigTypeSubkeyBinding, sp.CreationTime, both, append(s.extra(0x02), subpacket(32, back...))...)))
		if !s.revoked.IsZero() {
			b.Write(framed(2, sigBody(t, p, packet.SigTypeSubkeyRevocation, s.revoked, both, s.revocationReason())))
		}
	}
	var out bytes.Buffer
	w, err := armor.Encode(&out, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b.Bytes())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// newVCert is a primary key created at vt0 with a signing subkey revoked
// at vt0+10d and a signing subkey that expires at vt0+1d.
func newVCert(t *testing.T, algo packet.PublicKeyAlgorithm) (c *vcert, revoked, short *packet.PrivateKey) {
	c = &vcert{primary: vkey{priv: newPriv(t, algo, vt0, false)}}
	c.subs = []*vkey{
		{priv: newPriv(t, algo, vt0, true), revoked: vt0.Add(10 * 24 * time.Hour), reason: packet.KeyCompromised, text: "lost laptop"},
		{priv: newPriv(t, algo, vt0, true), life: 24 * time.Hour},
	}
	return c, c.subs[0].priv, c.subs[1].priv
}

// signedRPM builds a small package with rpmpack, signed (header, and header
// plus payload) by sign, as the demo base is.
func signedRPM(t *testing.T, sign func([]byte) ([]byte, error)) []byte {
	t.Helper()
	r, err := rpmpack.NewRPM(rpmpack.RPMMetaData{
		Name: "validity", Summary: "key validity test", Description: "key validity test",
		Version: "1.0", Release: "1", Arch: "noarch", OS: "linux", Licence: "MIT",
		BuildTime: vt0, Compressor: "gzip",
	})
	if err != nil {
		t.Fatal(err)
	}
	r.AddFile(rpmpack.RPMFile{Name: "/usr/share/validity/README", Body: []byte("hello\n"), Mode: 0o100644, Owner: "root", Group: "root", MTime: uint32(vt0.Unix())})
	r.SetPGPSigner(sign)
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rpmVerdict runs Debian's rpmkeys -K on the package with only key
// imported into an empty database. imported is false (and out says why)
// when rpm will not import the key.
func rpmVerdict(t *testing.T, rpmkeys string, pub []byte, pkg []byte) (imported, ok bool, out string) {
	t.Helper()
	dir := t.TempDir()
	keyFile, pkgFile := filepath.Join(dir, "key.asc"), filepath.Join(dir, "validity.rpm")
	os.WriteFile(keyFile, pub, 0o644)
	os.WriteFile(pkgFile, pkg, 0o644)
	db := filepath.Join(dir, "db")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(rpmkeys, append([]string{"--dbpath", db}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "LC_ALL=C")
		b, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	if o, err := run("--import", keyFile); err != nil {
		return false, false, "import refused: " + o + " (" + err.Error() + ")"
	}
	o, err := run("-Kv", pkgFile)
	return true, err == nil, o
}

// TestRPMKeyValidity signs packages (v4 and v3 signatures) with a revoked
// subkey, an expiring subkey and primary key (after and before the expiry),
// a revoked primary key and before the key existed, checks them as `builder
// inspect --keyring` and the lock do (Package.Verify), and compares with
// Debian's rpmkeys -K where rpm judges: a package we accept rpm must accept;
// one we refuse and rpm accepts is logged. rpm 4.18 judges none of these
// rules: it imports these keys and says OK to every package.
func TestRPMKeyValidity(t *testing.T) {
	day := 24 * time.Hour
	ed, edRevoked, edShort := newVCert(t, packet.PubKeyAlgoEdDSA)
	rs, rsRevoked, rsShort := newVCert(t, packet.PubKeyAlgoRSA)
	// Primary keys revoked on vt0+5d: EdDSA (v4 signatures), RSA (v3).
	revEd := &vcert{primary: vkey{priv: newPriv(t, packet.PubKeyAlgoEdDSA, vt0, false), revoked: vt0.Add(5 * day), reason: packet.KeyRetired}}
	revRSA := &vcert{primary: vkey{priv: newPriv(t, packet.PubKeyAlgoRSA, vt0, false), revoked: vt0.Add(5 * day), reason: packet.KeySuperseded, text: "new key"}}
	// A primary key that expires after a day.
	shortEd := &vcert{primary: vkey{priv: newPriv(t, packet.PubKeyAlgoEdDSA, vt0, false), life: day}}

	type sigFunc func(testing.TB, *packet.PrivateKey, []byte, time.Time) []byte
	sigV4, sigV3 := sigFunc(testutil.SignAt), sigFunc(testutil.SignV3At)
	cases := []struct {
		name string
		cert *vcert
		by   *packet.PrivateKey
		sign sigFunc
		at   time.Time
		rule error // nil: accepted
		msg  string
	}{
		{"v4 revoked subkey", ed, edRevoked, sigV4, vt0.Add(day), keyring.ErrKeyRevoked, "was revoked on 2025-01-11 00:00:00 UTC (key compromised: \"lost laptop\")"},
		{"v4 subkey after expiry", ed, edShort, sigV4, vt0.Add(2 * day), keyring.ErrKeyExpired, "had expired on 2025-01-02"},
		{"v4 subkey before expiry", ed, edShort, sigV4, vt0.Add(time.Hour), nil, ""},
		{"v4 revoked primary", revEd, revEd.primary.priv, sigV4, vt0.Add(day), keyring.ErrKeyRevoked, "was revoked on 2025-01-06 00:00:00 UTC (key retired)"},
		{"v4 primary after expiry", shortEd, shortEd.primary.priv, sigV4, vt0.Add(2 * day), keyring.ErrKeyExpired, "had expired on 2025-01-02"},
		{"v4 primary before expiry", shortEd, shortEd.primary.priv, sigV4, vt0.Add(time.Hour), nil, ""},
		{"v4 before key creation", ed, ed.primary.priv, sigV4, vt0.Add(-time.Hour), keyring.ErrKeyNotYetValid, "before key"},
		{"v4 primary", ed, ed.primary.priv, sigV4, vt0.Add(day), nil, ""},
		{"v4 RSA subkey after expiry", rs, rsShort, sigV4, vt0.Add(2 * day), keyring.ErrKeyExpired, "had expired"},
		{"v3 revoked subkey", rs, rsRevoked, sigV3, vt0.Add(day), keyring.ErrKeyRevoked, "was revoked"},
		{"v3 subkey after expiry", rs, rsShort, sigV3, vt0.Add(2 * day), keyring.ErrKeyExpired, "had expired"},
		{"v3 subkey before expiry", rs, rsShort, sigV3, vt0.Add(time.Hour), nil, ""},
		{"v3 revoked primary", revRSA, revRSA.primary.priv, sigV3, vt0.Add(day), keyring.ErrKeyRevoked, "(key superseded: \"new key\")"},
		{"v3 before key creation", rs, rs.primary.priv, sigV3, vt0.Add(-time.Hour), keyring.ErrKeyNotYetValid, "before key"},
		{"v3 primary", rs, rs.primary.priv, sigV3, vt0.Add(day), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pub := c.cert.armored(t)
			kr := &keyring.Keyring{}
			if err := kr.Add(pub); err != nil {
				t.Fatal(err)
			}
			pkg := signedRPM(t, func(b []byte) ([]byte, error) { return c.sign(t, c.by, b, c.at), nil })

			// As inspect and the lock check a package.
			p, err := Open(bytes.NewReader(pkg))
			if err != nil {
				t.Fatal(err)
			}
			v, err := p.Verify(VerifyOptions{Keyring: kr})
			if err != nil {
				t.Fatal(err)
			}
			if !v.DigestsOK() {
				t.Fatalf("digests: %+v", v.Checks)
			}
			if len(v.Signatures) != 2 {
				t.Fatalf("signatures: %+v", v.Signatures)
			}
			ours := v.Err(true)
			if c.rule == nil {
				if ours != nil {
					t.Fatalf("refused: %v", ours)
				}
				if fp := kr.Fingerprints()[0]; v.Signatures[0].Signer != fp {
					t.Errorf("signer %s, want %s", v.Signatures[0].Signer, fp)
				}
			} else {
				if ours == nil || !strings.Contains(ours.Error(), "refused: ") || !strings.Contains(ours.Error(), c.msg) {
					t.Fatalf("want refusal saying %q, got %v", c.msg, ours)
				}
				for _, s := range v.Signatures {
					if s.Verified {
						t.Errorf("%s signature verified", s.Covers)
					}
				}
				// The header signature again, straight through the keyring,
				// for the typed error Package.Verify flattens to a string.
				s, err := keyring.ParseSignature(p.Signature.Bytes(rpmhdr.SigRSA))
				if err != nil {
					t.Fatal(err)
				}
				h, _ := s.NewHash()
				h.Write(p.Header.Raw)
				if _, err := kr.Verify(s, h); !errors.Is(err, c.rule) {
					t.Errorf("header signature: %v, want %v", err, c.rule)
				}
				t.Logf("ours: %v", ours)
			}

			t.Run("rpmkeys", func(t *testing.T) {
				imported, rpmOK, out := rpmVerdict(t, testutil.NeedTool(t, "rpmkeys"), pub, pkg)
				switch {
				case !imported:
					t.Logf("rpm does not import the key: %s", out)
				case rpmOK && c.rule != nil:
					t.Logf("rpmkeys accepts what we refuse (rpm does not judge this rule):\n%s", out)
				case !rpmOK && c.rule == nil:
					t.Errorf("rpmkeys refuses a package we accept:\n%s", out)
				default:
					t.Logf("rpmkeys agrees:\n%s", out)
				}
			})
		})
	}
}

// TestFixtureKeysStillVerify: the old keys (CentOS 3-7, without key flags
// and with lifetimes long past) and the rpm.org test keys (alice signs with
// a subkey) still verify their packages under the validity rules.
func TestFixtureKeysStillVerify(t *testing.T) {
	rpms := testutil.Fixtures(t, "rpm")
	keys := testutil.Fixtures(t, "keys")
	for _, c := range []struct{ rpm, key string }{
		{"centos-release-3.1-1.i386.rpm", "RPM-GPG-KEY-CentOS-3"},
		{"centos-release-4-0.1.x86_64.rpm", "RPM-GPG-KEY-CentOS-4"},
		{"centos-release-5-0.0.el5.centos.2.x86_64.rpm", "RPM-GPG-KEY-CentOS-5"},
		{"centos-release-5-0.0.el5.centos.2.i386.rpm", "RPM-GPG-KEY-CentOS-5"},
		{"centos-release-6-0.el6.centos.5.x86_64.rpm", "RPM-GPG-KEY-CentOS-6"},
		{"centos-release-7-2.1511.el7.centos.2.10.x86_64.rpm", "RPM-GPG-KEY-CentOS-7"},
		{"epel-release-7-5.noarch.rpm", "RPM-GPG-KEY-CentOS-7"},
		{"hello-2.0-1.x86_64-signed.rpm", "rpm.org-rsa-2048-test.pub"},
		{"hello-2.0-1.x86_64-signed-with-subkey.rpm", "alice.asc"},
	} {
		kr, err := keyring.Load(filepath.Join(keys, c.key))
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(rpms, c.rpm))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Open(f)
		if err != nil {
			f.Close()
			t.Fatal(err)
		}
		v, err := p.Verify(VerifyOptions{Keyring: kr})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Err(true); err != nil {
			t.Errorf("%s with %s: %v", c.rpm, c.key, err)
		}
		for _, s := range v.Signatures {
			if !s.Verified {
				t.Errorf("%s with %s: %s signature: %s", c.rpm, c.key, s.Covers, s.Error)
			}
		}
	}
}
