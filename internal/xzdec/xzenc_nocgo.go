//go:build !cgo

package xzdec

import "io"

// CanEncode says whether Encode works in this build: without cgo, no.
const CanEncode = false

// EncoderModule names the encoder of this build, as builder/compressors
// records it: none ("").
const EncoderModule = ""

type blockEncoder struct{}

func newBlockEncoder(int) (*blockEncoder, error) { return nil, ErrNoEncoder }
func (*blockEncoder) encode(io.Reader, int64, int, io.Writer, func() bool) (blockInfo, error) {
	return blockInfo{}, ErrNoEncoder
}
func (*blockEncoder) end()                   {}
func streamHeader() []byte                   { return nil }
func streamTail([]blockInfo) ([]byte, error) { return nil, ErrNoEncoder }
