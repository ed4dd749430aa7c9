//go:build cgo

// Part of liblzma's encoder side, in a translation unit of its own where
// upstream files would clash in one (see liblzma_encoder.c).

#include "upstream/src/liblzma/common/block_encoder.c"
