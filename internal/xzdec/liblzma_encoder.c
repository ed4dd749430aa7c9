//go:build cgo

// liblzma's encoder side: the LZMA2 encoder (with its match finders and
// range coder), the Block, Index and Stream encoders and the threaded
// Stream encoder that xzenc.c drives. The Block, Index, threaded Stream
// encoders and the output queue are compiled in liblzma_encoder_*.c: their
// private names clash in one translation unit.
//
// cgo compiles only the .c files of the package directory, so the vendored
// upstream/ files are compiled through liblzma_*.c and xzdec.c, each of
// them exactly once (see README.md). The match finders and the LZMA
// encoder come first, LZMA2 after them: lzma_encoder.h declares what LZMA2
// needs only after lz_encoder.h, fastpos.h has get_dist_slot_2 only after
// lzma_common.h (so fastpos_table.c comes after them too).

#include "upstream/src/liblzma/lz/lz_encoder.c"
#include "upstream/src/liblzma/lz/lz_encoder_mf.c"
#include "upstream/src/liblzma/lzma/lzma_encoder.c"
#include "upstream/src/liblzma/lzma/lzma_encoder_optimum_fast.c"
#include "upstream/src/liblzma/lzma/lzma_encoder_optimum_normal.c"
#include "upstream/src/liblzma/lzma/lzma_encoder_presets.c"
#include "upstream/src/liblzma/lzma/lzma2_encoder.c"
#include "upstream/src/liblzma/lzma/fastpos_table.c"
#include "upstream/src/liblzma/rangecoder/price_table.c"
#include "upstream/src/liblzma/common/block_buffer_encoder.c"
#include "upstream/src/liblzma/common/block_header_encoder.c"
#include "upstream/src/liblzma/common/filter_encoder.c"
#include "upstream/src/liblzma/common/filter_flags_encoder.c"
#include "upstream/src/liblzma/common/index.c"
#include "upstream/src/liblzma/common/stream_flags_encoder.c"
#include "upstream/src/liblzma/common/vli_encoder.c"
