package authenticode

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// minimalPE is the smallest PE32+ image parse takes: headers only (no
// sections), 512 bytes, the 16 data directories.
func minimalPE() []byte {
	b := make([]byte, 0x200)
	le := binary.LittleEndian
	b[0], b[1] = 'M', 'Z'
	le.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], peSignature)
	coff := 0x44
	le.PutUint16(b[coff:], 0x8664)                      // x86-64
	le.PutUint16(b[coff+16:], optionalDataDirsOff+8*16) // SizeOfOptionalHeader
	opt := coff + coffHeaderSize
	le.PutUint16(b[opt:], magicPE32Plus)
	le.PutUint32(b[opt+60:], 0x200) // SizeOfHeaders
	le.PutUint32(b[opt+optionalNumRvaOff:], 16)
	return b
}

// withCertTable appends table as the image's certificate table.
func withCertTable(img, table []byte) []byte {
	l, err := parse(img)
	if err != nil {
		panic(err)
	}
	out := append(bytes.Clone(img), table...)
	binary.LittleEndian.PutUint32(out[l.certDir:], uint32(len(img)))
	binary.LittleEndian.PutUint32(out[l.certDir+4:], uint32(len(table)))
	return out
}

// TestVerifyShortTable: a certificate table shorter than a
// WIN_CERTIFICATE's header is refused with the reason (it panicked).
func TestVerifyShortTable(t *testing.T) {
	for n := 1; n < 8; n++ {
		_, err := Verify(withCertTable(minimalPE(), make([]byte, n)))
		if err == nil || !strings.Contains(err.Error(), "shorter than a WIN_CERTIFICATE header") {
			t.Errorf("a %d-byte certificate table: %v", n, err)
		}
	}
}

// FuzzVerify: no image panics Verify, Hash or Strip. Seeds: the minimal
// image unsigned and signed here; in testdata/fuzz/FuzzVerify, signed
// by another key, with a certificate table of 3 bytes, and with a
// WIN_CERTIFICATE of no PKCS#7.
func FuzzVerify(f *testing.F) {
	s, _ := testSigner(f)
	img := minimalPE()
	signed, err := Sign(img, s)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(img)
	f.Add(signed)
	f.Fuzz(func(t *testing.T, img []byte) {
		Verify(img)
		Hash(img)
		Strip(img)
	})
}
