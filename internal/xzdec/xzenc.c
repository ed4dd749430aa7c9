//go:build cgo

#include "config.h"
#include <lzma.h>
#include "xzenc.h"

int xzenc_encode(const uint8_t *in, size_t in_len, uint8_t *out,
		size_t out_len, size_t *out_n, uint32_t preset,
		uint64_t block_size, uint32_t threads)
{
	// The Blocks' bytes depend on the data, the preset and the block
	// size: the thread count only says how many are compressed at once.
	lzma_mt mt = {
		.flags = 0,
		.threads = threads,
		.block_size = block_size,
		.timeout = 0,
		.preset = preset,
		.filters = NULL,
		.check = LZMA_CHECK_CRC64,
	};
	lzma_stream strm = LZMA_STREAM_INIT;
	*out_n = 0;
	lzma_ret ret = lzma_stream_encoder_mt(&strm, &mt);
	if (ret != LZMA_OK)
		return ret;

	strm.next_in = in;
	strm.avail_in = in_len;
	strm.next_out = out;
	strm.avail_out = out_len;
	do {
		ret = lzma_code(&strm, LZMA_FINISH);
	} while (ret == LZMA_OK && strm.avail_out > 0);

	*out_n = out_len - strm.avail_out;
	lzma_end(&strm);
	if (ret == LZMA_STREAM_END)
		return LZMA_OK;
	if (ret == LZMA_OK)
		return LZMA_BUF_ERROR;
	return ret;
}
