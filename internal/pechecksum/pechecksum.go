// Package pechecksum computes the checksum of PE/COFF images, which both
// the UKI assembler and the Authenticode signer write.
package pechecksum

import (
	"encoding/binary"
	"math/bits"
)

// Of is the PE image checksum (as Windows' CheckSumMappedFile and
// the kernel's EFI stub compute it): the 16-bit one's-complement sum of
// the image as little-endian words, the checksum field (at offset field)
// taken as zero, plus the image's length.
func Of(b []byte, field int) uint32 {
	var sum uint64
	for i := 0; i+1 < len(b); i += 2 {
		if i == field || i == field+2 {
			continue
		}
		sum += uint64(binary.LittleEndian.Uint16(b[i:]))
		sum = (sum & 0xffff) + (sum >> 16)
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1])
		sum = (sum & 0xffff) + (sum >> 16)
	}
	return uint32(sum&0xffff) + uint32(len(b))
}

// Add returns sum (0, or what Add returned for the image's bytes before
// b) with b's little-endian 16-bit words added, for an image whose bytes
// come in parts (a UKI's sections are never copied into one buffer). b
// must start at an even offset of the image; an odd last byte counts as
// the low byte of a word, so the image's next byte must be zero (a
// section's padding) or its end. The checksum field must be zero in the
// bytes given. Finish makes the checksum.
func Add(sum uint32, b []byte) uint32 {
	// Eight bytes at a time: the one's-complement sum of the four words
	// of a 64-bit add with its carries wrapped around is theirs, folded.
	var wide, carry uint64
	for ; len(b) >= 8; b = b[8:] {
		wide, carry = bits.Add64(wide, binary.LittleEndian.Uint64(b), carry)
	}
	wide, carry = bits.Add64(wide, 0, carry)
	wide += carry
	s := uint64(sum) + wide&0xffffffff + wide>>32
	for ; len(b) >= 2; b = b[2:] {
		s += uint64(binary.LittleEndian.Uint16(b))
	}
	if len(b) == 1 {
		s += uint64(b[0])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint32(s)
}

// Finish is the checksum of an image of size bytes whose words Add
// summed.
func Finish(sum uint32, size int64) uint32 { return sum + uint32(size) }
