// Package pkcs7 writes the PKCS#7 (RFC 2315) SignedData that UEFI reads:
// Authenticode signatures of EFI executables (with signed attributes, see
// attest/authenticode) and the detached, attribute-less signatures of
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

// Parsed is what Verify reads of a SignedData with one signer.
type Parsed struct {
	ContentType asn1.ObjectIdentifier
	// Content is the carried content's DER (nil: detached).
	Content []byte
	// Signer is the certificate of the one signer, found among the
	// certificates carried by issuer and serial number.
	Signer *x509.Certificate
	// MessageDigest is the signed attribute, when there are attributes.
	MessageDigest []byte
	attrs         []byte // the signed attributes as a SET, as signed
	sig           []byte
}

// Parse reads a SignedData, in its ContentInfo or not, with exactly one
// signer whose certificate it carries.
func Parse(der []byte) (*Parsed, error) {
	var outer outerContentInfo
	if rest, err := asn1.Unmarshal(der, &outer); err == nil && len(rest) == 0 && outer.ContentType.Equal(OIDSignedData) {
		der = outer.Content.Bytes
	}
	var sd signedData
	if rest, err := asn1.Unmarshal(der, &sd); err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("not a PKCS#7 SignedData: %v", err)
	}
	if len(sd.SignerInfos) != 1 {
		return nil, fmt.Errorf("%d signers: want one", len(sd.SignerInfos))
	}
	si := sd.SignerInfos[0]
	p := &Parsed{ContentType: sd.ContentInfo.ContentType, sig: si.EncryptedDigest}
	if len(sd.ContentInfo.Content.Bytes) > 0 {
		p.Content = sd.ContentInfo.Content.Bytes
	}
	certs, err := x509.ParseCertificates(sd.Certificates.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the certificates: %w", err)
	}
	for _, c := range certs {
		if bytes.Equal(c.RawIssuer, si.IssuerAndSerial.Issuer.FullBytes) && c.SerialNumber.Cmp(si.IssuerAndSerial.Serial) == 0 {
			p.Signer = c
		}
	}
	if p.Signer == nil {
		return nil, errors.New("the signer's certificate is not carried")
	}
	if len(si.AuthenticatedAttrs.Bytes) > 0 {
		set := asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: si.AuthenticatedAttrs.Bytes}
		if p.attrs, err = asn1.Marshal(set); err != nil {
			return nil, err
		}
		rest := si.AuthenticatedAttrs.Bytes
		for len(rest) > 0 {
			var a attribute
			if rest, err = asn1.Unmarshal(rest, &a); err != nil {
				return nil, fmt.Errorf("a signed attribute: %w", err)
			}
			if a.Type.Equal(OIDMessageDigest) {
				if _, err := asn1.Unmarshal(a.Values.Bytes, &p.MessageDigest); err != nil {
					return nil, fmt.Errorf("the message digest: %w", err)
				}
			}
		}
		if p.MessageDigest == nil {
			return nil, errors.New("signed attributes without a message digest")
		}
	}
	return p, nil
}

// Verify checks the signer's signature: over the signed attributes when
// there are some (the caller compares MessageDigest with its content's),
// else over digest, the SHA-256 of the detached content.
func (p *Parsed) Verify(digest []byte) error {
	signed := digest
	if p.attrs != nil {
		sum := sha256.Sum256(p.attrs)
		signed = sum[:]
	}
	switch pub := p.Signer.PublicKey.(type) {
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(pub, crypto.SHA256, signed, p.sig)
	case *ecdsa.PublicKey:
		if !ecdsa.VerifyASN1(pub, signed, p.sig) {
			return errors.New("ECDSA signature does not verify")
		}
		return nil
	}
	return fmt.Errorf("a %T signer: want RSA or ECDSA", p.Signer.PublicKey)
}
