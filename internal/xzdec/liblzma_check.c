//go:build cgo

// Integrity checks: CRC32, CRC64 (slice-by-N tables) and SHA-256.
//
// cgo compiles only the .c files of the package directory, so the vendored
// upstream/ files are compiled through liblzma_*.c and xzdec.c, each of
// them exactly once (see README.md).

#include "upstream/src/liblzma/check/check.c"
#include "upstream/src/liblzma/check/crc32_fast.c"
#include "upstream/src/liblzma/check/crc32_table.c"
#include "upstream/src/liblzma/check/crc64_fast.c"
#include "upstream/src/liblzma/check/crc64_table.c"
#include "upstream/src/liblzma/check/sha256.c"
