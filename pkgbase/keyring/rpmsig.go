package keyring

import (
	"crypto"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
)

// ErrUnsupportedHash means the signature names a hash algorithm rpm does
// not know. rpm skips such a signature as if it were absent.
var ErrUnsupportedHash = errors.New("unsupported hash algorithm")

// ParsePackageSignature reads a signature from a package's signature
// header as rpm 4.18 does (rpmio's pgpPrtParams): one packet and nothing
// after it; for v4, the creation time in the hashed area, no critical
// subpacket rpm does not implement, and the key id of the first issuer
// subpacket, hashed ones first (an unhashed one can be changed without
// breaking the signature, and go-crypto keeps the last). A hash algorithm
// rpm does not know gives an error wrapping ErrUnsupportedHash.
func ParsePackageSignature(b []byte) (*Signature, error) {
	body, _, size, err := packetBody(b)
	if err != nil {
		return nil, err
	}
	if size != len(b) {
		return nil, fmt.Errorf("%d bytes follow the signature packet", len(b)-size)
	}
	if len(body) < 1 || body[0] != 4 {
		return ParseSignature(b)
	}
	if len(body) < 4 {
		return nil, errors.New("truncated v4 signature packet")
	}
	if _, ok := hashFromID(body[3]); !ok {
		return nil, fmt.Errorf("v4 signature: %w %d", ErrUnsupportedHash, body[3])
	}
	id, err := rpmSubpackets(body)
	if err != nil {
		return nil, err
	}
	s, err := ParseSignature(b)
	if err != nil {
		return nil, err
	}
	s.KeyID = id
	return s, nil
}

// rpmSubpackets walks the subpacket areas of a v4 signature body as rpm's
// pgpPrtSubType does and returns the issuer key id (0 when none).
func rpmSubpackets(body []byte) (keyID uint64, err error) {
	const (
		created = 1 << iota
		issuer
		flags
		keyExpiry
		sigExpiry
	)
	saved := 0
	p := body[4:] // the hashed area's length
	for _, hashed := range []bool{true, false} {
		if len(p) < 2 {
			return 0, errors.New("truncated v4 signature packet")
		}
		n := int(binary.BigEndian.Uint16(p))
		if len(p)-2 < n {
			return 0, errors.New("subpacket area overruns the signature packet")
		}
		area := p[2 : 2+n]
		p = p[2+n:]
		for len(area) > 0 {
			plen, lenlen := subpacketLen(area)
			if lenlen == 0 || plen < 1 {
				return 0, errors.New("malformed signature subpacket")
			}
			sp := area[lenlen : lenlen+plen]
			area = area[lenlen+plen:]
			typ, critical, data := sp[0]&0x7f, sp[0]&0x80 != 0, sp[1:]
			// What rpm understands, where; once for what it saves.
			once := func(bit int) error {
				if saved&bit != 0 {
					return fmt.Errorf("duplicate signature subpacket %d", typ)
				}
				saved |= bit
				return nil
			}
			impl := false
			switch {
			case typ == 2 && hashed && len(data) == 4:
				impl, err = true, once(created)
			case typ == 16 && len(data) == 8:
				impl = true
				if saved&issuer == 0 {
					keyID, saved = binary.BigEndian.Uint64(data), saved|issuer
				}
			case typ == 27 && hashed:
				impl, err = true, once(flags)
			case typ == 9 && hashed && len(data) == 4:
				impl, err = true, once(keyExpiry)
			case typ == 3 && hashed && len(data) == 4:
				impl, err = true, once(sigExpiry)
			case typ == 25 && hashed && len(data) == 1:
				impl = true
			}
			if err != nil {
				return 0, err
			}
			if critical && !impl {
				return 0, fmt.Errorf("critical signature subpacket %d that rpm does not implement", typ)
			}
		}
	}
	if saved&created == 0 {
		return 0, errors.New("no creation time in the hashed subpackets")
	}
	if len(p) < 2 {
		return 0, errors.New("truncated v4 signature packet")
	}
	return keyID, nil
}

// subpacketLen decodes a subpacket's length (rpm's pgpSubPktLen); lenlen
// is 0 when it is malformed or overruns b.
func subpacketLen(b []byte) (n, lenlen int) {
	switch {
	case len(b) > 0 && b[0] < 192:
		n, lenlen = int(b[0]), 1
	case len(b) > 2 && b[0] < 255:
		n, lenlen = (int(b[0])-192)<<8+int(b[1])+192, 2
	case len(b) > 5 && b[0] == 255:
		n, lenlen = int(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return 0, 0
	}
	if len(b)-lenlen < n {
		return 0, 0
	}
	return n, lenlen
}

// hashSuffix is what the signature hashes after the data.
func (s *Signature) hashSuffix() []byte {
	if s.v3 != nil {
		return s.HashSuffix
	}
	return s.v4.HashSuffix
}

// hashTag is the first two bytes of the digest the signature signs.
func (s *Signature) hashTag() [2]byte {
	if s.v3 != nil {
		return s.v3.hashTag
	}
	return s.v4.HashTag
}

// cloneHash copies h's state into a new hash of algorithm a, or returns
// nil when the hash cannot export its state.
func cloneHash(h hash.Hash, a crypto.Hash) hash.Hash {
	m, ok := h.(encoding.BinaryMarshaler)
	if !ok || !a.Available() {
		return nil
	}
	state, err := m.MarshalBinary()
	if err != nil {
		return nil
	}
	c := a.New()
	if u, ok := c.(encoding.BinaryUnmarshaler); !ok || u.UnmarshalBinary(state) != nil {
		return nil
	}
	return c
}
