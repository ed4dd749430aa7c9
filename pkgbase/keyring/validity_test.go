package keyring

import (
	"crypto"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/nodeforge/builder/internal/testutil"
)

// Fixed dates: every key and signature of these tests is made "at" one of
// them, long before the tests run, so "now" is after every expiry.
var (
	t0       = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) // keys created
	day      = 24 * time.Hour
	hour     = time.Hour
	lifetime = uint32(86400) // one day
)

func cfgAt(at time.Time, algo packet.PublicKeyAlgorithm, life uint32) *packet.Config {
	no := false
	return &packet.Config{
		Algorithm:                             algo,
		RSABits:                               1024, // the smallest go-crypto makes: fast
		DefaultHash:                           crypto.SHA256,
		Time:                                  func() time.Time { return at },
		KeyLifetimeSecs:                       life,
		NonDeterministicSignaturesViaNotation: &no,
	}
}

// testKeys is a primary key created at t0 with, beside go-crypto's
// encryption subkey, a signing subkey revoked later and a signing subkey
// that expires after one day.
type testKeys struct {
	e       *openpgp.Entity
	revoked *openpgp.Subkey // revoked at t0+10d, "key retired"
	short   *openpgp.Subkey // expires at t0+1d
}

func newTestKeys(t testing.TB, algo packet.PublicKeyAlgorithm) *testKeys {
	t.Helper()
	e, err := openpgp.NewEntity("validity test", "", "validity@example.org", cfgAt(t0, algo, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddSigningSubkey(cfgAt(t0, algo, 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.AddSigningSubkey(cfgAt(t0, algo, lifetime)); err != nil {
		t.Fatal(err)
	}
	k := &testKeys{e: e, revoked: &e.Subkeys[1], short: &e.Subkeys[2]}
	if err := e.RevokeSubkey(k.revoked, packet.KeyRetired, "retired by the test", cfgAt(t0.Add(10*day), algo, 0)); err != nil {
		t.Fatal(err)
	}
	return k
}

// keyringOf loads the public parts of es, as a keyring file would hold them.
func keyringOf(t testing.TB, es ...*openpgp.Entity) *Keyring {
	t.Helper()
	kr := &Keyring{}
	for _, e := range es {
		b, err := ArmoredPublic(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := kr.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	return kr
}

// wantRefused checks that err is a refusal by rule whose message says all of msgs.
func wantRefused(t *testing.T, err, rule error, msgs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("verified; want refusal (%v)", rule)
	}
	if !errors.Is(err, rule) {
		t.Fatalf("error %q does not wrap %v", err, rule)
	}
	for _, m := range append([]string{"refused: "}, msgs...) {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not say %q", err, m)
		}
	}
	t.Log(err)
}

func TestValidityV4(t *testing.T) {
	k := newTestKeys(t, packet.PubKeyAlgoEdDSA)
	kr := keyringOf(t, k.e)
	data := []byte("Origin: validity\n")
	pfp := fingerprint(k.e.PrimaryKey)

	t.Run("revoked subkey", func(t *testing.T) {
		// Made at t0+1d, nine days before the revocation: revocation wins.
		_, err := kr.VerifyDetached(data, testutil.SignAt(t, k.revoked.PrivateKey, data, t0.Add(day)))
		wantRefused(t, err, ErrKeyRevoked, "subkey "+fingerprint(k.revoked.PublicKey)+" of key "+pfp+" was revoked on 2025-01-11 00:00:00 UTC (key retired: \"retired by the test\")")
	})
	t.Run("expired subkey", func(t *testing.T) {
		_, err := kr.VerifyDetached(data, testutil.SignAt(t, k.short.PrivateKey, data, t0.Add(2*day)))
		wantRefused(t, err, ErrKeyExpired, "subkey "+fingerprint(k.short.PublicKey), "had expired on 2025-01-02 00:00:00 UTC before the signature was made on 2025-01-03 00:00:00 UTC")
	})
	t.Run("subkey signed before its expiry", func(t *testing.T) {
		// The subkey has long expired now; it was valid when it signed.
		fp, err := kr.VerifyDetached(data, testutil.SignAt(t, k.short.PrivateKey, data, t0.Add(23*hour)))
		if err != nil || fp != pfp {
			t.Fatalf("signer %q, %v", fp, err)
		}
	})
	t.Run("primary key", func(t *testing.T) {
		if fp, err := kr.VerifyDetached(data, testutil.SignAt(t, k.e.PrivateKey, data, t0.Add(400*day))); err != nil || fp != pfp {
			t.Fatalf("signer %q, %v", fp, err)
		}
	})
	t.Run("before key creation", func(t *testing.T) {
		_, err := kr.VerifyDetached(data, testutil.SignAt(t, k.e.PrivateKey, data, t0.Add(-hour)))
		wantRefused(t, err, ErrKeyNotYetValid, "made on 2024-12-31 23:00:00 UTC, before key "+pfp+" was created on 2025-01-01 00:00:00 UTC")
	})
	t.Run("before subkey creation", func(t *testing.T) {
		// A subkey added a week after its primary key.
		e := newTestKeys(t, packet.PubKeyAlgoEdDSA).e
		if err := e.AddSigningSubkey(cfgAt(t0.Add(7*day), packet.PubKeyAlgoEdDSA, 0)); err != nil {
			t.Fatal(err)
		}
		late := &e.Subkeys[len(e.Subkeys)-1]
		_, err := keyringOf(t, e).VerifyDetached(data, testutil.SignAt(t, late.PrivateKey, data, t0.Add(day)))
		wantRefused(t, err, ErrKeyNotYetValid, "before subkey "+fingerprint(late.PublicKey))
	})
	t.Run("tampered data is not a refusal", func(t *testing.T) {
		_, err := kr.VerifyDetached(append(data, 'x'), testutil.SignAt(t, k.revoked.PrivateKey, data, t0.Add(day)))
		if err == nil || errors.Is(err, ErrKeyRevoked) || !strings.Contains(err.Error(), "does not verify") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestValidityRevokedPrimary(t *testing.T) {
	k := newTestKeys(t, packet.PubKeyAlgoEdDSA)
	data := []byte("Origin: validity\n")
	before := keyringOf(t, k.e) // a copy made before the revocation
	if err := k.e.RevokeKey(packet.KeyCompromised, "lost laptop", cfgAt(t0.Add(30*day), packet.PubKeyAlgoEdDSA, 0)); err != nil {
		t.Fatal(err)
	}
	kr := keyringOf(t, k.e)
	pfp := fingerprint(k.e.PrimaryKey)
	primarySig := testutil.SignAt(t, k.e.PrivateKey, data, t0.Add(day))
	subkeySig := testutil.SignAt(t, k.short.PrivateKey, data, t0.Add(hour))

	_, err := kr.VerifyDetached(data, primarySig)
	wantRefused(t, err, ErrKeyRevoked, "key "+pfp+" was revoked on 2025-01-31 00:00:00 UTC (key compromised: \"lost laptop\")")
	// Its subkeys go with it.
	_, err = kr.VerifyDetached(data, subkeySig)
	wantRefused(t, err, ErrKeyRevoked, "primary key "+pfp+" of subkey "+fingerprint(k.short.PublicKey)+" was revoked")

	// Before the revocation was known the signatures verify; with both
	// copies of the key in the keyring, the revocation still wins.
	if _, err := before.VerifyDetached(data, primarySig); err != nil {
		t.Fatalf("unrevoked copy: %v", err)
	}
	both := keyringOf(t)
	both.entities = append(append(both.entities, before.entities...), kr.entities...)
	_, err = both.VerifyDetached(data, primarySig)
	wantRefused(t, err, ErrKeyRevoked)
}

func TestValidityPrimaryExpiry(t *testing.T) {
	e, err := openpgp.NewEntity("short", "", "short@example.org", cfgAt(t0, packet.PubKeyAlgoEdDSA, lifetime))
	if err != nil {
		t.Fatal(err)
	}
	kr := keyringOf(t, e)
	data := []byte("x")
	if _, err := kr.VerifyDetached(data, testutil.SignAt(t, e.PrivateKey, data, t0.Add(hour))); err != nil {
		t.Fatalf("signed while valid: %v", err)
	}
	_, err = kr.VerifyDetached(data, testutil.SignAt(t, e.PrivateKey, data, t0.Add(3*day)))
	wantRefused(t, err, ErrKeyExpired, "key "+fingerprint(e.PrimaryKey)+" had expired on 2025-01-02 00:00:00 UTC before the signature was made on 2025-01-04 00:00:00 UTC")
}

// TestValidityKeyUsage: key flags without the signing flag refuse, keys
// without key flags sign when their algorithm can (old keys), a signing
// subkey must be cross-certified.
func TestValidityKeyUsage(t *testing.T) {
	data := []byte("x")
	at := t0.Add(day)
	resign := func(t *testing.T, e *openpgp.Entity, sk *openpgp.Subkey) {
		t.Helper()
		if err := sk.Sig.SignKey(sk.PublicKey, e.PrivateKey, cfgAt(t0, e.PrimaryKey.PubKeyAlgo, 0)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("subkey flags lack sign", func(t *testing.T) {
		k := newTestKeys(t, packet.PubKeyAlgoEdDSA)
		k.short.Sig.FlagSign, k.short.Sig.FlagCertify = false, true
		k.short.Sig.EmbeddedSignature = nil
		resign(t, k.e, k.short)
		_, err := keyringOf(t, k.e).VerifyDetached(data, testutil.SignAt(t, k.short.PrivateKey, data, at))
		wantRefused(t, err, ErrKeyNotForSigning, "subkey "+fingerprint(k.short.PublicKey), "key flags lack the signing flag")
	})
	t.Run("subkey without flags, cross-certified", func(t *testing.T) {
		k := newTestKeys(t, packet.PubKeyAlgoEdDSA)
		k.short.Sig.FlagsValid, k.short.Sig.FlagSign = false, false
		resign(t, k.e, k.short)
		if _, err := keyringOf(t, k.e).VerifyDetached(data, testutil.SignAt(t, k.short.PrivateKey, data, at)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("subkey without flags, not cross-certified", func(t *testing.T) {
		k := newTestKeys(t, packet.PubKeyAlgoEdDSA)
		k.short.Sig.FlagsValid, k.short.Sig.FlagSign = false, false
		k.short.Sig.EmbeddedSignature = nil
		resign(t, k.e, k.short)
		_, err := keyringOf(t, k.e).VerifyDetached(data, testutil.SignAt(t, k.short.PrivateKey, data, at))
		wantRefused(t, err, ErrKeyNotForSigning, "not cross-certified")
	})
	t.Run("primary flags lack sign", func(t *testing.T) {
		k := newTestKeys(t, packet.PubKeyAlgoEdDSA)
		id := k.e.PrimaryIdentity()
		id.SelfSignature.FlagSign = false
		if err := id.SelfSignature.SignUserId(id.UserId.Id, k.e.PrimaryKey, k.e.PrivateKey, cfgAt(t0, packet.PubKeyAlgoEdDSA, 0)); err != nil {
			t.Fatal(err)
		}
		kr := keyringOf(t, k.e)
		_, err := kr.VerifyDetached(data, testutil.SignAt(t, k.e.PrivateKey, data, at))
		wantRefused(t, err, ErrKeyNotForSigning, "key "+fingerprint(k.e.PrimaryKey)+" may not sign data")
		// Its signing subkey still signs (alice.asc is such a key).
		if _, err := kr.VerifyDetached(data, testutil.SignAt(t, k.short.PrivateKey, data, t0.Add(hour))); err != nil {
			t.Fatal(err)
		}
	})
}

// TestValidityV3: the hand-parsed v3 signatures follow the same rules, by
// the creation time they carry.
func TestValidityV3(t *testing.T) {
	k := newTestKeys(t, packet.PubKeyAlgoRSA)
	kr := keyringOf(t, k.e)
	data := []byte("a v3 signed header")
	pfp := fingerprint(k.e.PrimaryKey)
	check := func(t *testing.T, priv *packet.PrivateKey, at time.Time, rule error, msgs ...string) {
		t.Helper()
		sig := testutil.SignV3At(t, priv, data, at)
		s, err := ParseSignature(sig)
		if err != nil || s.Version != 3 || !s.Created.Equal(at) {
			t.Fatalf("v3 packet: %+v, %v", s, err)
		}
		fp, err := kr.VerifyDetached(data, sig)
		if rule == nil {
			if err != nil || fp != pfp {
				t.Fatalf("signer %q, %v", fp, err)
			}
			return
		}
		wantRefused(t, err, rule, msgs...)
	}
	t.Run("primary key", func(t *testing.T) { check(t, k.e.PrivateKey, t0.Add(day), nil) })
	t.Run("before key creation", func(t *testing.T) {
		check(t, k.e.PrivateKey, t0.Add(-day), ErrKeyNotYetValid, "made on 2024-12-31 00:00:00 UTC, before key "+pfp)
	})
	t.Run("revoked subkey", func(t *testing.T) {
		check(t, k.revoked.PrivateKey, t0.Add(day), ErrKeyRevoked, "subkey "+fingerprint(k.revoked.PublicKey)+" of key "+pfp+" was revoked")
	})
	t.Run("expired subkey", func(t *testing.T) {
		check(t, k.short.PrivateKey, t0.Add(2*day), ErrKeyExpired, "had expired on 2025-01-02 00:00:00 UTC")
	})
	t.Run("subkey signed before its expiry", func(t *testing.T) { check(t, k.short.PrivateKey, t0.Add(hour), nil) })
	t.Run("revoked primary key", func(t *testing.T) {
		if err := k.e.RevokeKey(packet.NoReason, "", cfgAt(t0.Add(5*day), packet.PubKeyAlgoRSA, 0)); err != nil {
			t.Fatal(err)
		}
		kr = keyringOf(t, k.e)
		check(t, k.e.PrivateKey, t0.Add(day), ErrKeyRevoked, "key "+pfp+" was revoked on 2025-01-06 00:00:00 UTC (no reason specified)")
	})
}
