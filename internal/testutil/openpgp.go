package testutil

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"math/big"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// SignAt makes a v4 binary signature by exactly priv over data, dated at
// (go-crypto's DetachSign would pick another key, or none, for a revoked
// or expired one; tests of key validity need that very key).
func SignAt(t testing.TB, priv *packet.PrivateKey, data []byte, at time.Time) []byte {
	t.Helper()
	no := false
	cfg := &packet.Config{DefaultHash: crypto.SHA256, Time: func() time.Time { return at }, NonDeterministicSignaturesViaNotation: &no}
	sig := &packet.Signature{Version: priv.PublicKey.Version, SigType: packet.SigTypeBinary, PubKeyAlgo: priv.PubKeyAlgo, Hash: crypto.SHA256,
		CreationTime: at, IssuerKeyId: &priv.KeyId, IssuerFingerprint: priv.Fingerprint}
	h, err := sig.PrepareSign(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.Write(data)
	if err := sig.Sign(h, priv, cfg); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := sig.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// SignV3At makes the version 3 RSA signature packet older rpmsign wrote
// (CentOS 3-7), by priv over data, dated at. go-crypto no longer writes
// them.
func SignV3At(t testing.TB, priv *packet.PrivateKey, data []byte, at time.Time) []byte {
	t.Helper()
	c := uint32(at.Unix())
	suffix := []byte{byte(packet.SigTypeBinary), byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)}
	h := sha256.New()
	h.Write(data)
	h.Write(suffix)
	sum := h.Sum(nil)
	raw, err := rsa.SignPKCS1v15(rand.Reader, priv.PrivateKey.(*rsa.PrivateKey), crypto.SHA256, sum)
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte{3, 5}, suffix...)
	body = binary.BigEndian.AppendUint64(body, priv.KeyId)
	body = append(body, byte(packet.PubKeyAlgoRSA), 8 /* SHA256 */, sum[0], sum[1])
	m := new(big.Int).SetBytes(raw) // an MPI: no leading zero bytes
	body = binary.BigEndian.AppendUint16(body, uint16(m.BitLen()))
	body = append(body, m.Bytes()...)
	return append(binary.BigEndian.AppendUint16([]byte{0x89}, uint16(len(body))), body...) // old format, tag 2, two-byte length
}
