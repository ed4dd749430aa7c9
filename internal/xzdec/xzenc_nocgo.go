//go:build !cgo

package xzdec

import "io"

// CanEncode says whether Encode works in this build: without cgo, no.
const CanEncode = false

// EncoderModule names the encoder of this build, as builder/compressors
// records it: none ("").
const EncoderModule = ""

func encode([]byte, EncodeOptions) ([]byte, error) { return nil, ErrNoEncoder }

type encoder struct{}

func newEncoder(io.Writer, EncodeOptions) (*Encoder, error) { return nil, ErrNoEncoder }
func (*encoder) code([]byte, bool) error                    { return ErrNoEncoder }
func (*encoder) end()                                       {}
