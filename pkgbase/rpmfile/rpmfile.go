// Package rpmfile reads .rpm package files: the lead, the signature header,
// the main header, and the payload as a stream of cpio entries. It checks
// the header and payload digests and the OpenPGP signatures the package
// carries.
package rpmfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// LeadSize is the fixed size of the legacy lead.
const LeadSize = 96

var leadMagic = []byte{0xed, 0xab, 0xee, 0xdb}

// Lead is the legacy 96-byte lead.
type Lead struct {
	Major, Minor  byte
	Type          uint16 // 0 binary, 1 source
	ArchNum       uint16
	Name          string
	OSNum         uint16
	SignatureType uint16
}

// Package is an opened .rpm: headers in memory, payload still unread.
type Package struct {
	Lead      Lead
	Signature *rpmhdr.Header
	Header    *rpmhdr.Header
	// Payload is positioned at the first payload byte (compressed).
	payload io.Reader
}

// Open reads the lead and both headers from r and leaves r positioned at
// the payload. Nothing beyond the headers is read.
func Open(r io.Reader) (*Package, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var lead [LeadSize]byte
	if n, err := io.ReadFull(br, lead[:]); err != nil {
		return nil, fmt.Errorf("not an rpm: lead truncated after %d bytes", n)
	}
	if !bytes.Equal(lead[:4], leadMagic) {
		return nil, fmt.Errorf("not an rpm: bad lead magic % x", lead[:4])
	}
	p := &Package{Lead: Lead{
		Major:         lead[4],
		Minor:         lead[5],
		Type:          binary.BigEndian.Uint16(lead[6:]),
		ArchNum:       binary.BigEndian.Uint16(lead[8:]),
		Name:          cString(lead[10:76]),
		OSNum:         binary.BigEndian.Uint16(lead[76:]),
		SignatureType: binary.BigEndian.Uint16(lead[78:]),
	}}
	if p.Lead.SignatureType != 5 {
		return nil, fmt.Errorf("unsupported signature type %d in lead (only header-style 5 exists since rpm 3)", p.Lead.SignatureType)
	}
	sig, err := rpmhdr.ReadHeader(br)
	if err != nil {
		return nil, fmt.Errorf("signature header: %w", noMore(err))
	}
	if err := checkSigHeader(sig); err != nil {
		return nil, fmt.Errorf("signature header: %w", err)
	}
	// The signature header is padded to a multiple of 8 bytes.
	if pad := (8 - len(sig.Raw)%8) % 8; pad > 0 {
		if _, err := io.CopyN(io.Discard, br, int64(pad)); err != nil {
			return nil, fmt.Errorf("signature header padding truncated: %w", err)
		}
	}
	hdr, err := rpmhdr.ReadHeader(br)
	if err != nil {
		return nil, fmt.Errorf("main header: %w", noMore(err))
	}
	p.Signature, p.Header, p.payload = sig, hdr, br
	return p, nil
}

func noMore(err error) error {
	if errors.Is(err, rpmhdr.ErrNoMoreHeaders) {
		return errors.New("missing (file ends)")
	}
	return err
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// PayloadReader returns the raw (compressed) payload stream. It can be read once.
func (p *Package) PayloadReader() io.Reader { return p.payload }

// IsSource reports whether this is a source package.
func (p *Package) IsSource() bool {
	return p.Header.Has(rpmhdr.TagSourcePackage) || p.Lead.Type == 1
}

// Compressor returns the payload compressor named by the header ("gzip"
// when the tag is absent, as rpm assumes).
func (p *Package) Compressor() string {
	c := p.Header.String(rpmhdr.TagPayloadCompressor)
	if c == "" {
		return "gzip"
	}
	return c
}
