// Package pcr computes what systemd-stub measures of a unified kernel
// image into TPM PCR 11, and signs the PCR policies of the boot phases the
// way systemd-measure does: the .pcrsig (JSON) and .pcrpkey (PEM public
// key) sections with which a node binds disk encryption to "any UKI signed
// by this key" instead of to one image's hashes.
//
// systemd-stub extends PCR 11, for each section it knows in the order of
// its section table (not the file's), with the SHA-256 of the section's
// name (with its NUL) and then of its data (VirtualSize bytes); .pcrsig
// is never measured. systemd-pcrphase then extends the phase words
// ("enter-initrd", ...). Judged by systemd-measure calculate and by a
// TPM: the value swtpm holds after booting the UKI.
package pcr

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"debug/pe"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
)

// Index is the PCR systemd-stub measures UKI sections into.
const Index = 11

// order is systemd's section table (UnifiedSection), the order of
// measurement; a stub measures those of its version (see Known).
var order = []string{".linux", ".osrel", ".cmdline", ".initrd", ".ucode", ".splash", ".dtb", ".uname", ".sbat", ".pcrpkey", ".profile", ".dtbauto", ".hwids"}

// Phases are the boot phases systemd-measure signs by default: a policy
// per phase, so that a secret can be bound to the initrd alone.
var Phases = []string{
	"enter-initrd",
	"enter-initrd:leave-initrd",
	"enter-initrd:leave-initrd:sysinit",
	"enter-initrd:leave-initrd:sysinit:ready",
}

// Known lists the sections stub measures, in order: those of systemd's
// table whose names the stub carries as strings (systemd 252's knows
// .linux, .osrel, .cmdline, .initrd, .splash, .dtb and .pcrpkey; later
// ones add .uname, .sbat...).
func Known(stub []byte) []string {
	var out []string
	for _, n := range order {
		if bytes.Contains(stub, []byte("\x00"+n+"\x00")) {
			out = append(out, n)
		}
	}
	return out
}

// Sections reads the measured sections of a UKI: name -> the data the
// stub sees in memory (VirtualSize bytes).
func Sections(img []byte, known []string) (map[string][]byte, error) {
	f, err := pe.NewFile(bytes.NewReader(img))
	if err != nil {
		return nil, fmt.Errorf("the UKI: %w", err)
	}
	out := map[string][]byte{}
	for _, n := range known {
		s := f.Section(n)
		if s == nil {
			continue
		}
		d, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", n, err)
		}
		if v := int(s.VirtualSize); v <= len(d) {
			d = d[:v]
		} else {
			d = append(d, make([]byte, v-len(d))...) // zero-filled in memory
		}
		out[n] = d
	}
	return out, nil
}

// Measure is PCR 11 after the stub measured sections (from zero).
func Measure(sections map[string][]byte, known []string) []byte {
	v := make([]byte, sha256.Size)
	for _, n := range known {
		d, ok := sections[n]
		if !ok {
			continue
		}
		v = extend(v, []byte(n+"\x00"))
		v = extend(v, d)
	}
	return v
}

// Phase is PCR 11 after systemd-pcrphase measured the words of phase
// ("enter-initrd:leave-initrd") on top of v.
func Phase(v []byte, phase string) []byte {
	for _, w := range strings.Split(phase, ":") {
		v = extend(v, []byte(w))
	}
	return v
}

func extend(v, data []byte) []byte {
	d := sha256.Sum256(data)
	n := sha256.Sum256(append(bytes.Clone(v), d[:]...))
	return n[:]
}

// PolicyDigest is the TPM2 policy digest of a PolicyPCR on PCR 11 of the
// SHA-256 bank holding value, from an empty policy.
func PolicyDigest(value []byte) []byte {
	const ccPolicyPCR = 0x0000017F
	const algSHA256 = 0x000B
	h := sha256.New()
	h.Write(make([]byte, sha256.Size))
	binary.Write(h, binary.BigEndian, uint32(ccPolicyPCR))
	// TPML_PCR_SELECTION: one selection, SHA-256, a 3-byte bitmap.
	binary.Write(h, binary.BigEndian, uint32(1))
	binary.Write(h, binary.BigEndian, uint16(algSHA256))
	sel := [4]byte{3}
	sel[1+Index/8] |= 1 << (Index % 8)
	h.Write(sel[:])
	pd := sha256.Sum256(value)
	h.Write(pd[:])
	return h.Sum(nil)
}

// entry is one signed policy of .pcrsig, as systemd-measure writes it.
type entry struct {
	PCRs []int  `json:"pcrs"`
	PKFP string `json:"pkfp"` // SHA-256 of the public key's PKCS#1 DER
	Pol  string `json:"pol"`  // the policy digest, hex
	Sig  string `json:"sig"`  // RSA PKCS#1 v1.5 over SHA-256 of the digest, base64
}

// Signature is the content of .pcrsig: for each phase, the policy of PCR
// 11's expected value signed with key ({"sha256": [...]}).
func Signature(measured []byte, key crypto.Signer) ([]byte, error) {
	pub, ok := key.Public().(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("the PCR policy key is a %T, not RSA", key.Public())
	}
	// systemd names the key by the SHA-256 of its PKCS#1 DER
	// (OpenSSL's i2d_PublicKey).
	fp := sha256.Sum256(x509.MarshalPKCS1PublicKey(pub))
	var entries []entry
	for _, ph := range Phases {
		pol := PolicyDigest(Phase(measured, ph))
		sum := sha256.Sum256(pol)
		// PKCS#1 v1.5: deterministic, in a file or on a token.
		sig, err := key.Sign(rand.Reader, sum[:], crypto.SHA256)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{PCRs: []int{Index}, PKFP: hex.EncodeToString(fp[:]), Pol: hex.EncodeToString(pol), Sig: base64.StdEncoding.EncodeToString(sig)})
	}
	return json.Marshal(map[string][]entry{"sha256": entries})
}

// PublicKey is the content of .pcrpkey: the key's public half in PEM.
func PublicKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
