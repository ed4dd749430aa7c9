//go:build cgo

// The LZ window and the LZMA1 decoder (the hot loop).
//
// cgo compiles only the .c files of the package directory, so the vendored
// upstream/ files are compiled through liblzma_*.c and xzdec.c, each of
// them exactly once (see README.md).

#include "upstream/src/liblzma/lz/lz_decoder.c"
#include "upstream/src/liblzma/lzma/lzma_decoder.c"
