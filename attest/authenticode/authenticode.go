// Package authenticode signs EFI executables (PE/COFF images) the way UEFI
// Secure Boot checks them: an Authenticode signature, a PKCS#7 SignedData
// over the image's Authenticode hash (SHA-256), in a WIN_CERTIFICATE
// appended to the image and named by its certificate table.
//
// The PKCS#7 SignedData is relic's (github.com/sassoftware/relic/v8's
// lib/pkcs7, which digests Authenticode's content the Authenticode way:
// its inner octets); the PE layout (the hash's ranges, the certificate
// table, the checksum) is written here from the specification
// (Microsoft's "Windows Authenticode Portable Executable Signature
// Format"): relic's PE signer writes other bytes and cannot remove a
// signature (docs/architecture.md, Secure Boot). Judged by sbsigntool's
// sbverify and osslsigncode.
//
// Signing adds only the certificate table and the two header fields that
// name it (and the checksum): Strip gives back the unsigned image.
package authenticode

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/nodeforge/builder/internal/pechecksum"
	"github.com/sassoftware/relic/v8/lib/pkcs7"
)

// Object identifiers of Authenticode and SHA-256.
var (
	oidSHA256          = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSPCIndirectData = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 4}
	oidSPCPEImageData  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 15}
	oidSPCSpOpusInfo   = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 12}
)

const (
	winCertRevision2     = 0x0200
	winCertTypePKCS      = 0x0002
	certTableEntry       = 4 // IMAGE_DIRECTORY_ENTRY_SECURITY
	optionalChecksumOff  = 64
	optionalDataDirsOff  = 112 // PE32+
	optionalNumRvaOff    = 108
	peSignature          = "PE\x00\x00"
	coffHeaderSize       = 20
	sectionHeaderSize    = 40
	magicPE32Plus        = 0x20b
	maxCertificateLength = 1 << 20
)

// layout is where Authenticode's hash skips.
type layout struct {
	checksum      int // offset of the optional header's CheckSum
	certDir       int // offset of the certificate table's data directory entry
	sizeOfHeaders int
	sections      [][2]int // raw data: offset, size; sorted by offset
	certOffset    int      // the certificate table, 0 when none
	certSize      int
}

func parse(b []byte) (*layout, error) {
	le := binary.LittleEndian
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return nil, errors.New("not a PE image (no MZ header)")
	}
	pe := int(le.Uint32(b[0x3c:]))
	if pe < 0x40 || pe+4+coffHeaderSize > len(b) || string(b[pe:pe+4]) != peSignature {
		return nil, errors.New("not a PE image (no PE signature)")
	}
	coff := pe + 4
	n := int(le.Uint16(b[coff+2:]))
	optSize := int(le.Uint16(b[coff+16:]))
	opt := coff + coffHeaderSize
	table := opt + optSize
	if optSize < optionalDataDirsOff+8*(certTableEntry+1) || table+n*sectionHeaderSize > len(b) {
		return nil, errors.New("the PE headers are truncated")
	}
	if le.Uint16(b[opt:]) != magicPE32Plus {
		return nil, errors.New("not a PE32+ image")
	}
	if le.Uint32(b[opt+optionalNumRvaOff:]) <= certTableEntry {
		return nil, errors.New("the image has no certificate table entry")
	}
	l := &layout{checksum: opt + optionalChecksumOff, certDir: opt + optionalDataDirsOff + 8*certTableEntry, sizeOfHeaders: int(le.Uint32(b[opt+60:]))}
	if l.sizeOfHeaders > len(b) || l.sizeOfHeaders < table+n*sectionHeaderSize {
		return nil, errors.New("the size of the PE headers is out of range")
	}
	l.certOffset, l.certSize = int(le.Uint32(b[l.certDir:])), int(le.Uint32(b[l.certDir+4:]))
	if l.certSize != 0 && (l.certOffset < l.sizeOfHeaders || l.certOffset+l.certSize != len(b)) {
		return nil, errors.New("the certificate table is not at the end of the image")
	}
	for i := range n {
		s := b[table+i*sectionHeaderSize:]
		size, off := int(le.Uint32(s[16:])), int(le.Uint32(s[20:]))
		if size == 0 {
			continue
		}
		if off < l.sizeOfHeaders || off+size > len(b) || (l.certSize != 0 && off+size > l.certOffset) {
			return nil, fmt.Errorf("section %d's raw data (%d bytes at %d) is out of the image", i, size, off)
		}
		l.sections = append(l.sections, [2]int{off, size})
	}
	sort.Slice(l.sections, func(i, j int) bool { return l.sections[i][0] < l.sections[j][0] })
	return l, nil
}

// Hash is the Authenticode SHA-256 of a PE image: the headers without the
// checksum and the certificate table's entry, the sections' raw data in
// file order, then whatever follows them but the certificate table.
func Hash(img []byte) ([]byte, error) {
	l, err := parse(img)
	if err != nil {
		return nil, err
	}
	return l.hash(img), nil
}

func (l *layout) hash(b []byte) []byte {
	h := sha256.New()
	h.Write(b[:l.checksum])
	h.Write(b[l.checksum+4 : l.certDir])
	h.Write(b[l.certDir+8 : l.sizeOfHeaders])
	end := l.sizeOfHeaders
	for _, s := range l.sections {
		h.Write(b[s[0] : s[0]+s[1]])
		end = max(end, s[0]+s[1])
	}
	last := len(b)
	if l.certSize != 0 {
		last = l.certOffset
	}
	if end < last {
		h.Write(b[end:last])
	}
	return h.Sum(nil)
}

// Strip removes the certificate table (and the header fields naming it),
// giving back the image as it was before it was signed.
func Strip(img []byte) ([]byte, error) {
	l, err := parse(img)
	if err != nil {
		return nil, err
	}
	if l.certSize == 0 {
		return bytes.Clone(img), nil
	}
	out := bytes.Clone(img[:l.certOffset])
	// Signing pads the image to 8 bytes before the table; that padding
	// is the signer's, not the image's.
	binary.LittleEndian.PutUint64(out[l.certDir:], 0)
	setChecksum(out, l.checksum)
	return out, nil
}

// Signer is a key and its certificate: Secure Boot's PK, KEK and db
// keys, which sign images (Sign) and authenticated variables.
type Signer struct {
	Key  crypto.Signer // RSA (PKCS#1 v1.5, deterministic) or ECDSA
	Cert *x509.Certificate
}

// Sign returns the image signed: an Authenticode signature appended in a
// certificate table. An image already signed is refused (UEFI checks
// every signature of a table; sign the unsigned image once).
func Sign(img []byte, s Signer) ([]byte, error) {
	l, err := parse(img)
	if err != nil {
		return nil, err
	}
	if l.certSize != 0 {
		return nil, errors.New("the image is signed already")
	}
	// The table starts 8-byte aligned; the padding is hashed as data
	// that follows the sections.
	out := bytes.Clone(img)
	out = append(out, make([]byte, (8-len(out)%8)%8)...)
	digest := l.hash(out)
	der, err := signedData(digest, s)
	if err != nil {
		return nil, err
	}
	if len(der) > maxCertificateLength {
		return nil, errors.New("the signature is too large")
	}
	entry := make([]byte, 8, 8+len(der)+8)
	entry = append(entry, der...)
	entry = append(entry, make([]byte, (8-len(entry)%8)%8)...)
	le := binary.LittleEndian
	le.PutUint32(entry[0:], uint32(len(entry)))
	le.PutUint16(entry[4:], winCertRevision2)
	le.PutUint16(entry[6:], winCertTypePKCS)
	le.PutUint32(out[l.certDir:], uint32(len(out)))
	le.PutUint32(out[l.certDir+4:], uint32(len(entry)))
	out = append(out, entry...)
	setChecksum(out, l.checksum)
	return out, nil
}

// setChecksum writes the PE checksum of b into its field.
func setChecksum(b []byte, field int) {
	binary.LittleEndian.PutUint32(b[field:], pechecksum.Of(b, field))
}

// The ASN.1 of Authenticode's content.
type (
	digestInfo struct {
		Algorithm pkix.AlgorithmIdentifier
		Digest    []byte
	}
	spcAttributeValue struct {
		Type  asn1.ObjectIdentifier
		Value spcPEImageData `asn1:"optional"`
	}
	spcPEImageData struct {
		Flags asn1.BitString
		File  asn1.RawValue // [0] SpcLink, built by hand (a RawValue's own tag is what encodes)
	}
	spcIndirectDataContent struct {
		Data          spcAttributeValue
		MessageDigest digestInfo
	}
)

// signedData is the PKCS#7 SignedData of an Authenticode signature over
// an image digest, in its ContentInfo: relic's builder, which signs the
// SpcSpOpusInfo, content type and message digest attributes (in that
// order, the DER order of the three) over the content's inner octets.
func signedData(imageDigest []byte, s Signer) ([]byte, error) {
	if s.Key == nil || s.Cert == nil {
		return nil, errors.New("no signing key or certificate")
	}
	// SpcLink's file: an SpcString, the UTF-16 "<<<Obsolete>>>" every
	// signer writes ([2] IMPLICIT BMPString inside [0]).
	obsolete := []byte{}
	for _, r := range "<<<Obsolete>>>" {
		obsolete = append(obsolete, 0, byte(r))
	}
	file, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 2, IsCompound: true,
		Bytes: mustMarshal(asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, Bytes: obsolete})})
	if err != nil {
		return nil, err
	}
	content := spcIndirectDataContent{
		Data: spcAttributeValue{Type: oidSPCPEImageData, Value: spcPEImageData{Flags: asn1.BitString{Bytes: []byte{}},
			File: asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: file}}},
		MessageDigest: digestInfo{Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidSHA256, Parameters: asn1.NullRawValue}, Digest: imageDigest},
	}
	b := pkcs7.NewBuilder(s.Key, []*x509.Certificate{s.Cert}, crypto.SHA256)
	if err := b.SetContent(oidSPCIndirectData, content); err != nil {
		return nil, err
	}
	if err := b.AddAuthenticatedAttribute(oidSPCSpOpusInfo, asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSequence, IsCompound: true}); err != nil {
		return nil, err
	}
	sd, err := b.Sign()
	if err != nil {
		return nil, err
	}
	return sd.Marshal()
}

func mustMarshal(v any) []byte {
	b, err := asn1.Marshal(v)
	if err != nil {
		panic(err) // fixed values only
	}
	return b
}

// Verify checks an image's Authenticode signature, the one a firmware
// would check, and returns its signer's certificate: the digest it signs
// is the image's, the signed attributes carry the content's digest, and
// the signature over them holds with the certificate's key. Whether the
// certificate is trusted is the caller's question.
func Verify(img []byte) (*x509.Certificate, error) {
	l, err := parse(img)
	if err != nil {
		return nil, err
	}
	if l.certSize == 0 {
		return nil, errors.New("the image is not signed")
	}
	entry := img[l.certOffset:]
	le := binary.LittleEndian
	if len(entry) < 8 {
		return nil, fmt.Errorf("the certificate table is %d bytes, shorter than a WIN_CERTIFICATE header", len(entry))
	}
	n := int(le.Uint32(entry))
	if n < 8 || n > len(entry) || le.Uint16(entry[4:]) != winCertRevision2 || le.Uint16(entry[6:]) != winCertTypePKCS {
		return nil, errors.New("the certificate table holds no PKCS#7 WIN_CERTIFICATE")
	}
	p, err := pkcs7.Unmarshal(trimDER(entry[8:n]))
	if err != nil {
		return nil, fmt.Errorf("not a PKCS#7 SignedData: %w", err)
	}
	sd := &p.Content
	if !p.ContentType.Equal(pkcs7.OidSignedData) || len(sd.SignerInfos) != 1 {
		return nil, fmt.Errorf("the signature is not a SignedData of one signer (%d)", len(sd.SignerInfos))
	}
	if len(sd.SignerInfos[0].AuthenticatedAttributes) == 0 {
		return nil, errors.New("the signature has no signed attributes (Authenticode signs its content's digest in them)")
	}
	var content spcIndirectDataContent
	if !sd.ContentInfo.ContentType.Equal(oidSPCIndirectData) || sd.ContentInfo.Unmarshal(&content) != nil {
		return nil, errors.New("the signature's content is not Authenticode's")
	}
	if !bytes.Equal(content.MessageDigest.Digest, l.hash(img)) {
		return nil, errors.New("the image's digest is not the one signed: the image changed after signing")
	}
	// relic checks the message digest (over the content's inner octets)
	// and the signature over the signed attributes.
	sig, err := sd.Verify(nil, false)
	if err != nil {
		return nil, fmt.Errorf("the signature does not hold: %w", err)
	}
	return sig.Certificate, nil
}

// trimDER cuts the padding after a DER value (the table pads entries to
// 8 bytes).
func trimDER(b []byte) []byte {
	var v asn1.RawValue
	if rest, err := asn1.Unmarshal(b, &v); err == nil {
		return b[:len(b)-len(rest)]
	}
	return b
}
