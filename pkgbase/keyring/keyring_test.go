package keyring

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/nodeforge/builder/internal/testutil"
)

func entity(t *testing.T, algo packet.PublicKeyAlgorithm) *openpgp.Entity {
	e, err := openpgp.NewEntity("k", "", "k@example.org", &packet.Config{Algorithm: algo, RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func armoredPublic(t *testing.T, es ...*openpgp.Entity) []byte {
	var buf bytes.Buffer
	for _, e := range es {
		w, _ := armor.Encode(&buf, openpgp.PublicKeyType, nil)
		e.Serialize(w)
		w.Close()
		buf.WriteString("\n")
	}
	return buf.Bytes()
}

func TestVerifyDetached(t *testing.T) {
	for _, algo := range []packet.PublicKeyAlgorithm{packet.PubKeyAlgoEdDSA, packet.PubKeyAlgoRSA} {
		signer, other := entity(t, algo), entity(t, packet.PubKeyAlgoEdDSA)
		// Two armored blocks in one file: both keys load.
		dir := t.TempDir()
		p := filepath.Join(dir, "keys.asc")
		os.WriteFile(p, armoredPublic(t, other, signer), 0o644)
		kr, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if kr.Len() != 2 || len(kr.Fingerprints()) != 2 {
			t.Fatalf("loaded %d keys", kr.Len())
		}
		data := []byte("Origin: test\nComponents: classic\n")
		var sig bytes.Buffer
		if err := openpgp.ArmoredDetachSign(&sig, signer, bytes.NewReader(data), nil); err != nil {
			t.Fatal(err)
		}
		fp, err := kr.VerifyDetached(data, sig.Bytes())
		if err != nil {
			t.Fatalf("%v: %v", algo, err)
		}
		if !strings.EqualFold(fp, strings.ToUpper(bytesHex(signer.PrimaryKey.Fingerprint))) {
			t.Errorf("signer %s", fp)
		}
		if _, err := kr.VerifyDetached(append(data, 'x'), sig.Bytes()); err == nil {
			t.Errorf("%v: altered data verified", algo)
		}
		only := &Keyring{}
		only.Add(armoredPublic(t, other))
		if _, err := only.VerifyDetached(data, sig.Bytes()); err == nil || !strings.Contains(err.Error(), "not in the keyring") {
			t.Errorf("%v: unknown key: %v", algo, err)
		}
	}
}

func bytesHex(b []byte) string {
	const h = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, h[c>>4], h[c&15])
	}
	return string(out)
}

func TestParseSignatureErrors(t *testing.T) {
	for _, b := range [][]byte{nil, {0x01}, {0x88, 0x10, 0x03}, []byte("-----BEGIN PGP SIGNATURE-----\n\nxx\n-----END PGP SIGNATURE-----\n"), {0x88, 0x05, 0x03, 0x05, 0x00, 0x00, 0x00}} {
		if _, err := ParseSignature(b); err == nil {
			t.Errorf("% x: parsed", b)
		}
	}
	if _, err := (&Keyring{}).VerifyDetached([]byte("x"), nil); err == nil {
		t.Error("empty signature verified")
	}
	if err := (&Keyring{}).Add([]byte("not a key")); err == nil {
		t.Error("garbage key accepted")
	}
}

// FuzzParseSignature: any bytes, read as a detached or a package
// signature and checked against a keyring holding the signer, never panic.
func FuzzParseSignature(f *testing.F) {
	f.Add([]byte{0x89, 0x00, 0x05, 0x03, 0x05, 0x00})
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		f.Fatal(err)
	}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	priv := packet.NewRSAPrivateKey(at, k)
	e, err := openpgp.NewEntity("k", "", "k@example.org", &packet.Config{Time: func() time.Time { return at }})
	if err != nil {
		f.Fatal(err)
	}
	e.PrimaryKey, e.PrivateKey = &priv.PublicKey, priv
	kr := &Keyring{entities: openpgp.EntityList{e}}
	f.Add(testutil.SignAt(f, priv, []byte("data"), at))
	f.Add(testutil.SignV3At(f, priv, []byte("data"), at))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, parse := range []func([]byte) (*Signature, error){ParseSignature, ParsePackageSignature} {
			s, err := parse(b)
			if err != nil {
				continue
			}
			if h, err := s.NewHash(); err == nil {
				h.Write([]byte("data"))
				kr.Verify(s, h)
			}
		}
	})
}
