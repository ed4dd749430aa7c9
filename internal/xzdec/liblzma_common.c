//go:build cgo

// liblzma's core (lzma_code, allocation, filter chains) and the .xz and
// .lzma container code, except the Stream and Block decoders: xzdec.c
// compiles those.
//
// cgo compiles only the .c files of the package directory, so the vendored
// upstream/ files are compiled through liblzma_*.c and xzdec.c, each of
// them exactly once (see README.md).

#include "upstream/src/liblzma/common/common.c"
#include "upstream/src/liblzma/common/alone_decoder.c"
#include "upstream/src/liblzma/common/block_header_decoder.c"
#include "upstream/src/liblzma/common/block_util.c"
#include "upstream/src/liblzma/common/filter_common.c"
#include "upstream/src/liblzma/common/filter_decoder.c"
#include "upstream/src/liblzma/common/filter_flags_decoder.c"
#include "upstream/src/liblzma/common/index_hash.c"
#include "upstream/src/liblzma/common/stream_flags_common.c"
#include "upstream/src/liblzma/common/stream_flags_decoder.c"
#include "upstream/src/liblzma/common/vli_decoder.c"
#include "upstream/src/liblzma/common/vli_size.c"
