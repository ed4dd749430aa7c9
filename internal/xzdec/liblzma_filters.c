//go:build cgo

// LZMA2 chunk decoder and the Delta and BCJ filter decoders.
//
// cgo compiles only the .c files of the package directory, so the vendored
// upstream/ files are compiled through liblzma_*.c and xzdec.c, each of
// them exactly once (see README.md).

#include "upstream/src/liblzma/lzma/lzma2_decoder.c"
#include "upstream/src/liblzma/delta/delta_common.c"
#include "upstream/src/liblzma/delta/delta_decoder.c"
#include "upstream/src/liblzma/simple/simple_coder.c"
#include "upstream/src/liblzma/simple/simple_decoder.c"
#include "upstream/src/liblzma/simple/x86.c"
#include "upstream/src/liblzma/simple/powerpc.c"
#include "upstream/src/liblzma/simple/ia64.c"
#include "upstream/src/liblzma/simple/arm.c"
#include "upstream/src/liblzma/simple/armthumb.c"
#include "upstream/src/liblzma/simple/arm64.c"
#include "upstream/src/liblzma/simple/sparc.c"
