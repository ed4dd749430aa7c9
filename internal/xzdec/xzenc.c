//go:build cgo

#include "config.h"
#include <stdlib.h>
#include <lzma.h>
#include "xzenc.h"

// start starts strm as the threaded encoder of xzenc.h's Streams.
static lzma_ret start(lzma_stream *strm, uint32_t preset, uint64_t block_size,
		uint32_t threads)
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
	return lzma_stream_encoder_mt(strm, &mt);
}

int xzenc_encode(const uint8_t *in, size_t in_len, uint8_t *out,
		size_t out_len, size_t *out_n, uint32_t preset,
		uint64_t block_size, uint32_t threads)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	*out_n = 0;
	lzma_ret ret = start(&strm, preset, block_size, threads);
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

void *xzenc_new(uint32_t preset, uint64_t block_size, uint32_t threads,
		int *ret)
{
	lzma_stream init = LZMA_STREAM_INIT;
	lzma_stream *strm = malloc(sizeof(*strm));
	if (strm == NULL) {
		*ret = LZMA_MEM_ERROR;
		return NULL;
	}
	*strm = init;
	*ret = start(strm, preset, block_size, threads);
	if (*ret != LZMA_OK) {
		lzma_end(strm);
		free(strm);
		return NULL;
	}
	return strm;
}

int xzenc_code(void *s, const uint8_t *in, size_t in_len,
		size_t *in_used, uint8_t *out, size_t out_len, size_t *out_n,
		int finish)
{
	lzma_stream *strm = s;
	strm->next_in = in;
	strm->avail_in = in_len;
	strm->next_out = out;
	strm->avail_out = out_len;
	lzma_ret ret = lzma_code(strm, finish ? LZMA_FINISH : LZMA_RUN);
	*in_used = in_len - strm->avail_in;
	*out_n = out_len - strm->avail_out;
	// No pointer into the caller's memory outlives the call.
	strm->next_in = NULL;
	strm->avail_in = 0;
	strm->next_out = NULL;
	strm->avail_out = 0;
	return ret;
}

void xzenc_end(void *s)
{
	lzma_end(s);
	free(s);
}
