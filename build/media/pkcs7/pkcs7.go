// Package pkcs7 writes the PKCS#7 (RFC 2315) SignedData that UEFI reads:
// Authenticode signatures of EFI executables (with signed attributes, see
// build/media/authenticode) and the detached, attribute-less signatures of
// time-based authenticated variables (see build/media/secureboot).
//
// Written here because the Go PKCS#7 packages at hand hash the whole
// encapsulated content, where Authenticode hashes its inner octets, and
// always add signed attributes, which efitools and sbvarsign leave out.
// Signatures are RSA PKCS#1 v1.5 (deterministic) or ECDSA over SHA-256.
package pkcs7

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"sort"
)

// Object identifiers of PKCS#7 and its attributes.
var (
	OIDData            = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	OIDSignedData      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	OIDContentType     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	OIDMessageDigest   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	oidSHA256          = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidRSAEncryption   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidECDSAWithSHA256 = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
)

// SHA256 is the digest algorithm every signature here uses.
var SHA256 = pkix.AlgorithmIdentifier{Algorithm: oidSHA256, Parameters: asn1.NullRawValue}

// Signer is a key and its certificate.
type Signer struct {
	Key  crypto.Signer // RSA (PKCS#1 v1.5) or ECDSA P-256
	Cert *x509.Certificate
}

// Attribute is a signed attribute: a type and its one value (DER).
type Attribute struct {
	Type  asn1.ObjectIdentifier
	Value []byte
}

// Content is what a SignedData signs: its type, and its DER when it is
// carried (nil: detached).
type Content struct {
	Type asn1.ObjectIdentifier
	DER  []byte
}

type (
	attribute struct {
		Type   asn1.ObjectIdentifier
		Values asn1.RawValue // SET OF one value
	}
	issuerAndSerial struct {
		Issuer asn1.RawValue
		Serial *big.Int
	}
	signerInfo struct {
		Version            int
		IssuerAndSerial    issuerAndSerial
		DigestAlgorithm    pkix.AlgorithmIdentifier
		AuthenticatedAttrs asn1.RawValue `asn1:"optional,tag:0"`
		DigestEncryption   pkix.AlgorithmIdentifier
		EncryptedDigest    []byte
	}
	contentInfo struct {
		ContentType asn1.ObjectIdentifier
		Content     asn1.RawValue `asn1:"optional"` // [0] EXPLICIT, built by hand
	}
	signedData struct {
		Version          int
		DigestAlgorithms []pkix.AlgorithmIdentifier `asn1:"set"`
		ContentInfo      contentInfo
		Certificates     asn1.RawValue `asn1:"tag:0"`
		SignerInfos      []signerInfo  `asn1:"set"`
	}
	outerContentInfo struct {
		ContentType asn1.ObjectIdentifier
		Content     asn1.RawValue // [0] EXPLICIT SignedData
	}
)

// SignedData is the DER of a SignedData (without the ContentInfo around
// it: see Wrap) by one signer over content c. digest is the SHA-256 of
// what c stands for. With attrs the signature covers the attributes as a
// SET, and attrs must hold the digest as the message digest; without
// them it covers the digest itself.
func SignedData(s Signer, c Content, attrs []Attribute, digest []byte) ([]byte, error) {
	if s.Key == nil || s.Cert == nil {
		return nil, errors.New("no signing key or certificate")
	}
	si := signerInfo{
		Version:          1,
		IssuerAndSerial:  issuerAndSerial{Issuer: asn1.RawValue{FullBytes: s.Cert.RawIssuer}, Serial: s.Cert.SerialNumber},
		DigestAlgorithm:  SHA256,
		DigestEncryption: pkix.AlgorithmIdentifier{},
	}
	signed := digest
	if attrs != nil {
		set, err := marshalSet(attrs)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(set)
		signed = sum[:]
		// What is signed is the attributes as a SET; what is stored is
		// the same bytes under [0] IMPLICIT.
		var raw asn1.RawValue
		if _, err := asn1.Unmarshal(set, &raw); err != nil {
			return nil, err
		}
		si.AuthenticatedAttrs = asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: raw.Bytes}
	}
	var err error
	if si.EncryptedDigest, si.DigestEncryption, err = sign(s.Key, signed); err != nil {
		return nil, err
	}
	ci := contentInfo{ContentType: c.Type}
	if c.DER != nil {
		ci.Content = asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: c.DER}
	}
	return asn1.Marshal(signedData{
		Version:          1,
		DigestAlgorithms: []pkix.AlgorithmIdentifier{SHA256},
		ContentInfo:      ci,
		Certificates:     asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: s.Cert.Raw},
		SignerInfos:      []signerInfo{si},
	})
}

// Wrap puts a SignedData in its ContentInfo, as Authenticode stores it.
func Wrap(sd []byte) ([]byte, error) {
	return asn1.Marshal(outerContentInfo{ContentType: OIDSignedData,
		Content: asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: sd}})
}

// marshalSet encodes attributes as a DER SET OF: its members sorted by
// their encodings.
func marshalSet(attrs []Attribute) ([]byte, error) {
	var enc [][]byte
	for _, a := range attrs {
		b, err := asn1.Marshal(attribute{Type: a.Type, Values: asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: a.Value}})
		if err != nil {
			return nil, err
		}
		enc = append(enc, b)
	}
	sort.Slice(enc, func(i, j int) bool { return bytes.Compare(enc[i], enc[j]) < 0 })
	return asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: bytes.Join(enc, nil)})
}

// sign signs a SHA-256 digest: RSA PKCS#1 v1.5 or ECDSA.
func sign(key crypto.Signer, digest []byte) ([]byte, pkix.AlgorithmIdentifier, error) {
	switch key.Public().(type) {
	case *rsa.PublicKey:
		// PKCS#1 v1.5 takes no randomness (Go uses the reader for
		// blinding only): the same input and key give the same signature.
		sig, err := key.Sign(rand.Reader, digest, crypto.SHA256)
		return sig, pkix.AlgorithmIdentifier{Algorithm: oidRSAEncryption, Parameters: asn1.NullRawValue}, err
	case *ecdsa.PublicKey:
		sig, err := key.Sign(rand.Reader, digest, crypto.SHA256)
		return sig, pkix.AlgorithmIdentifier{Algorithm: oidECDSAWithSHA256}, err
	}
	return nil, pkix.AlgorithmIdentifier{}, fmt.Errorf("a %T key: want RSA or ECDSA", key.Public())
}
