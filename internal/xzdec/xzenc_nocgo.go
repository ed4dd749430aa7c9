//go:build !cgo

package xzdec

// CanEncode says whether Encode works in this build: without cgo, no.
const CanEncode = false

// EncoderModule names the encoder of this build, as builder/compressors
// records it: none ("").
const EncoderModule = ""

func encode([]byte, EncodeOptions) ([]byte, error) { return nil, ErrNoEncoder }
