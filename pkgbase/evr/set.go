package evr

// ALT Linux set-versions (rpm's lib/set.c by Alexey Tourbin).
//
// A library built with ALT's rpm provides "libfoo.so.1 = set:..." where
// the set is the list of exported symbols, and binaries linked against it
// require "libfoo.so.1 >= set:..." with the symbols they use. The require
// is met when the provided set contains the required one.
//
// A set-string is "set:" + b + M + payload:
//   - b = 'a' + (bpp - 7): bits per hash value, 10..32;
//   - M = 'a' + (Mshift - 7): the Golomb-Rice parameter, 7..31, < bpp;
//   - payload: the sorted, deduplicated hash values, delta-encoded,
//     Golomb-Rice coded and written in ALT's base62 (below).
//
// The symbols are hashed with Jenkins' one-at-a-time hash seeded with
// 0x9e3779b9 and masked to bpp bits, so sets with different bpp can still
// be compared after masking the wider one down (downsampling).

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

const (
	minSetBpp    = 10
	maxSetBpp    = 32
	minSetMshift = 7
	maxSetMshift = 31
)

// SetCmp results besides 1 (strict superset), 0 (equal), -1 (strict
// subset) and -2 (neither).
const (
	SetProvidedError = -3
	SetRequiredError = -4
)

// setHash is Jenkins' one-at-a-time hash as ALT's set.c computes it.
func setHash(s string) uint32 {
	h := uint32(0x9e3779b9)
	for i := 0; i < len(s); i++ {
		h += uint32(s[i])
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return h
}

// bppMask returns the low-bpp-bits mask; bpp is 1..32.
func bppMask(bpp int) uint32 {
	return uint32(uint64(1)<<uint(bpp) - 1)
}

// SetValues returns the sorted, deduplicated hash values that EncodeSet
// encodes for symbols at bpp bits per value.
func SetValues(bpp int, symbols []string) []uint32 {
	if bpp < 1 || bpp > 32 {
		return nil
	}
	mask := bppMask(bpp)
	v := make([]uint32, len(symbols))
	for i, s := range symbols {
		v[i] = setHash(s) & mask
	}
	slices.Sort(v)
	return slices.Compact(v)
}

// encodeMshift is set.c's choice of the Golomb-Rice parameter for n values.
func encodeMshift(n, bpp int) int {
	m := bpp - (bits.Len(uint(n)) - 1) - 1
	return min(max(m, minSetMshift), maxSetMshift)
}

// EncodeSet builds the set-version ("set:...") of symbols at bpp bits per
// hash value, exactly as ALT's rpm does (set_fini), so the result can be
// compared with set-versions found in ALT repositories. Duplicate symbols
// are allowed; an empty list or bpp outside 10..32 is an error.
func EncodeSet(bpp int, symbols []string) (string, error) {
	if bpp < minSetBpp || bpp > maxSetBpp {
		return "", fmt.Errorf("evr: set-version bpp %d out of range %d..%d", bpp, minSetBpp, maxSetBpp)
	}
	if len(symbols) == 0 {
		return "", errors.New("evr: set-version of no symbols")
	}
	return encodeSetValues(bpp, SetValues(bpp, symbols)), nil
}

// encodeSetValues encodes sorted unique values (each < 1<<bpp).
func encodeSetValues(bpp int, v []uint32) string {
	mshift := encodeMshift(len(v), bpp)
	var w base62Writer
	w.out = make([]byte, 0, len(setPrefix)+2+len(v)*(mshift+2)/5+2)
	w.out = append(w.out, setPrefix...)
	w.out = append(w.out, byte('a'+bpp-7), byte('a'+mshift-7))
	mask := bppMask(mshift)
	prev := uint32(0)
	for i, x := range v {
		d := x
		if i > 0 {
			d = x - prev
		}
		prev = x
		// Golomb-Rice: d>>Mshift zero bits, a one bit, then the low
		// Mshift bits least significant first.
		for q := d >> uint(mshift); q > 0; q-- {
			w.bit(0)
		}
		w.bit(1)
		r := d & mask
		for k := 0; k < mshift; k++ {
			w.bit(byte(r>>uint(k)) & 1)
		}
	}
	w.flush()
	return string(w.out)
}

// base62Writer packs bits, least significant first, into 6-bit numbers.
// Numbers 0..60 become one character of 0-9a-zA-Z. 61, 62 and 63 all
// become 'Z', and the next number gets its two high bits preset to 00, 01
// or 10 respectively, so it carries only 4 more bits; a preset of 11
// cannot occur, so 'Z' never needs escaping twice.
type base62Writer struct {
	out   []byte
	num   uint32 // pending number
	bits6 int    // bits of num filled from the stream
	bits2 int    // preset high bits of num (0 or 2)
}

const base62Digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

func (w *base62Writer) bit(b byte) {
	w.num |= uint32(b) << uint(w.bits6)
	w.bits6++
	if w.bits6+w.bits2 < 6 {
		return
	}
	switch w.num {
	case 61, 62, 63:
		w.out = append(w.out, 'Z')
		w.num = (w.num - 61) << 4
		w.bits2 = 2
	default:
		w.out = append(w.out, base62Digits[w.num])
		w.num = 0
		w.bits2 = 0
	}
	w.bits6 = 0
}

func (w *base62Writer) flush() {
	if w.bits6+w.bits2 > 0 {
		// A partial number has its top bit clear, so it is below 61.
		w.out = append(w.out, base62Digits[w.num])
	}
}

// base62Value maps a character to its 6-bit value, or 0xff.
var base62Value = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(base62Digits); i++ {
		t[base62Digits[i]] = byte(i)
	}
	return t
}()

var (
	errSetPrefix  = errors.New("evr: set-version: bad header")
	errSetBpp     = errors.New("evr: set-version: bpp out of range 10..32")
	errSetMshift  = errors.New("evr: set-version: Mshift out of range 7..31 or not below bpp")
	errSetEmpty   = errors.New("evr: set-version: empty set")
	errSetChar    = errors.New("evr: set-version: character outside base62")
	errSetEscape  = errors.New("evr: set-version: bad 'Z' escape")
	errSetPadding = errors.New("evr: set-version: too many trailing zero bits")
	errSetTrunc   = errors.New("evr: set-version: truncated value")
	errSetRange   = errors.New("evr: set-version: value does not fit bpp bits")
)

// decodeSetHeader reads "[set:]bM..." and returns bpp, Mshift and the
// payload, applying set.c's decode_set_init checks.
func decodeSetHeader(s string) (bpp, mshift int, payload string, err error) {
	s = strings.TrimPrefix(s, setPrefix)
	if len(s) < 2 {
		return 0, 0, "", errSetPrefix
	}
	bpp = int(s[0]) - 'a' + 7
	if bpp < minSetBpp || bpp > maxSetBpp {
		return 0, 0, "", errSetBpp
	}
	mshift = int(s[1]) - 'a' + 7
	if mshift < minSetMshift || mshift > maxSetMshift || mshift >= bpp {
		return 0, 0, "", errSetMshift
	}
	if len(s) == 2 {
		return 0, 0, "", errSetEmpty
	}
	return bpp, mshift, s[2:], nil
}

// DecodeSet decodes a set-version (with or without the "set:" prefix) into
// its bpp and its sorted, unique hash values. It accepts what ALT's
// decoder accepts, except that a value that does not fit bpp bits (which
// no encoder produces) is an error rather than being wrapped around.
func DecodeSet(s string) (bpp int, values []uint32, err error) {
	bpp, mshift, payload, err := decodeSetHeader(s)
	if err != nil {
		return 0, nil, err
	}
	values, err = decodeSetPayload(payload, bpp, mshift)
	if err != nil {
		return 0, nil, err
	}
	return bpp, values, nil
}

// bitReader yields the bits of a base62 payload, least significant first.
type bitReader struct {
	s   string
	pos int
	buf uint64 // valid bits are the low n; the rest are zero
	n   int
	err error
}

// refill appends the bits of the next character (6 bits, or 10 for a 'Z'
// escape pair) to buf. It returns false at the end of the input or on an
// error (then r.err is set).
func (r *bitReader) refill() bool {
	if r.pos >= len(r.s) || r.err != nil {
		return false
	}
	c := base62Value[r.s[r.pos]]
	r.pos++
	if c == 0xff {
		r.err = errSetChar
		return false
	}
	if c != 61 {
		r.buf |= uint64(c) << uint(r.n)
		r.n += 6
		return true
	}
	if r.pos >= len(r.s) {
		r.err = errSetEscape
		return false
	}
	c2 := base62Value[r.s[r.pos]]
	r.pos++
	if c2 == 0xff {
		r.err = errSetChar
		return false
	}
	hi := c2 >> 4 // 0, 1 or 2 select 61, 62 or 63; 3 is invalid
	if hi == 3 {
		r.err = errSetEscape
		return false
	}
	v := uint64(61+hi) | uint64(c2&15)<<6
	r.buf |= v << uint(r.n)
	r.n += 10
	return true
}

func (r *bitReader) consume(k int) {
	r.buf >>= uint(k)
	r.n -= k
}

// decodeSetPayload undoes base62, Golomb-Rice and delta coding.
func decodeSetPayload(payload string, bpp, mshift int) ([]uint32, error) {
	r := bitReader{s: payload}
	// Each value takes at least Mshift+1 bits, each character at most 6
	// (10 per 2 for escapes), which bounds the count.
	out := make([]uint32, 0, len(payload)*6/(mshift+1)+1)
	limit := uint64(1) << uint(bpp)
	maxQ := limit >> uint(mshift)
	mmask := uint64(1)<<uint(mshift) - 1
	var prev uint64
	for {
		// Unary part: count zero bits up to a one bit.
		var q uint64
		one := false
		for {
			if r.n == 0 && !r.refill() {
				break
			}
			if r.buf == 0 {
				q += uint64(r.n)
				r.consume(r.n)
			} else {
				tz := bits.TrailingZeros64(r.buf)
				q += uint64(tz)
				r.consume(tz + 1)
				one = true
				break
			}
			// Stop early on long zero runs; the slack keeps room for
			// the up to 5 padding bits that end the string.
			if q > maxQ+8 {
				return nil, errSetRange
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		if !one {
			// Trailing zero bits complete the last character; ALT
			// allows at most 5 of them.
			if q > 5 {
				return nil, errSetPadding
			}
			break
		}
		if q >= maxQ {
			return nil, errSetRange
		}
		for r.n < mshift {
			if !r.refill() {
				if r.err != nil {
					return nil, r.err
				}
				return nil, errSetTrunc
			}
		}
		d := q<<uint(mshift) | r.buf&mmask
		r.consume(mshift)
		v := d
		if len(out) > 0 {
			v = prev + d
		}
		if v >= limit {
			return nil, errSetRange
		}
		// A zero delta repeats a value; the encoder never writes one,
		// but ALT's decoder tolerates it, so just drop the duplicate.
		if len(out) == 0 || v != prev {
			out = append(out, uint32(v))
		}
		prev = v
	}
	if len(out) == 0 {
		return nil, errSetEmpty
	}
	return out, nil
}

// SetCmp compares a provided set-version with a required one (ALT's
// rpmsetcmp): 1 if the provided set is a strict superset of the required
// one, 0 if they are equal, -1 if it is a strict subset, -2 if neither;
// SetProvidedError (-3) or SetRequiredError (-4) if a string does not
// decode. Sets of different bpp are compared after masking the values of
// the wider one down to the narrower bpp.
func SetCmp(provided, required string) int {
	pbpp, pm, ppay, err := decodeSetHeader(provided)
	if err != nil {
		return SetProvidedError
	}
	rbpp, rm, rpay, err := decodeSetHeader(required)
	if err != nil {
		return SetRequiredError
	}
	pv, err := decodeSetPayload(ppay, pbpp, pm)
	if err != nil {
		return SetProvidedError
	}
	rv, err := decodeSetPayload(rpay, rbpp, rm)
	if err != nil {
		return SetRequiredError
	}
	switch {
	case pbpp > rbpp:
		pv = downsample(pv, pbpp, rbpp)
	case rbpp > pbpp:
		rv = downsample(rv, rbpp, pbpp)
	}
	return cmpSorted(pv, rv)
}

// downsample masks sorted unique values (each below 1<<from) down to bpp
// bits, keeping them sorted and unique. Like ALT's set.c it drops one bit
// at a time: the values with the top bit set form a sorted tail, and once
// that bit is cleared the tail merges linearly with the head, which is
// much cheaper than sorting again.
func downsample(v []uint32, from, bpp int) []uint32 {
	buf := make([]uint32, len(v))
	for b := from - 1; b >= bpp; b-- {
		mask := bppMask(b)
		u, _ := slices.BinarySearch(v, mask+1)
		head, tail := v[:u], v[u:]
		out := buf[:0]
		i, j := 0, 0
		for i < len(head) && j < len(tail) {
			h, t := head[i], tail[j]&mask
			switch {
			case h < t:
				out = append(out, h)
				i++
			case t < h:
				out = append(out, t)
				j++
			default:
				out = append(out, h)
				i++
				j++
			}
		}
		out = append(out, head[i:]...)
		for ; j < len(tail); j++ {
			out = append(out, tail[j]&mask)
		}
		v, buf = out, v[:cap(v)]
	}
	return v
}

// cmpSorted compares two sorted unique sets: 1 if p is a strict superset
// of r, 0 if equal, -1 if a strict subset, -2 otherwise.
func cmpSorted(p, r []uint32) int {
	ge, le := true, true
	i, j := 0, 0
	for i < len(p) && j < len(r) {
		switch {
		case p[i] < r[j]:
			le = false
			i++
		case p[i] > r[j]:
			ge = false
			j++
		default:
			i++
			j++
		}
		if !ge && !le {
			return -2
		}
	}
	if i < len(p) {
		le = false
	}
	if j < len(r) {
		ge = false
	}
	switch {
	case ge && le:
		return 0
	case ge:
		return 1
	case le:
		return -1
	}
	return -2
}
