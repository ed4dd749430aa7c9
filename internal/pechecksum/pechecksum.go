// Package pechecksum computes the checksum of PE/COFF images, which both
// the UKI assembler and the Authenticode signer write.
package pechecksum

import "encoding/binary"

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
