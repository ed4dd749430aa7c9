//go:build cgo

#include "config.h"
#include <stdlib.h>
#include <lzma.h>
#include "xzenc.h"

// A Block encoder: what one worker thread of liblzma's threaded encoder
// (stream_encoder_mt.c) holds, so that its Blocks come out byte for byte
// as that encoder's.
typedef struct {
	lzma_stream strm;
	lzma_options_lzma opt;
	lzma_filter filters[2];
	lzma_block block;
} xzblk;

void *xzblk_new(uint32_t preset, int *ret)
{
	lzma_stream init = LZMA_STREAM_INIT;
	xzblk *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		*ret = LZMA_MEM_ERROR;
		return NULL;
	}
	b->strm = init;
	if (lzma_lzma_preset(&b->opt, preset)) {
		free(b);
		*ret = LZMA_OPTIONS_ERROR;
		return NULL;
	}
	// lzma_easy_preset's chain: LZMA2 alone.
	b->filters[0].id = LZMA_FILTER_LZMA2;
	b->filters[0].options = &b->opt;
	b->filters[1].id = LZMA_VLI_UNKNOWN;
	b->filters[1].options = NULL;
	*ret = LZMA_OK;
	return b;
}

int xzblk_start(void *v, uint64_t block_size, uint32_t *header_size,
		uint64_t *bound)
{
	xzblk *b = v;
	// As worker_encode: the header is sized for the Block's largest
	// sizes, then written with its own (the padding makes up).
	*bound = lzma_block_buffer_bound(block_size);
	b->block = (lzma_block){
		.version = 0,
		.check = LZMA_CHECK_CRC64,
		.compressed_size = *bound,
		.uncompressed_size = block_size,
		.filters = b->filters,
	};
	lzma_ret ret = lzma_block_header_size(&b->block);
	if (ret != LZMA_OK)
		return ret;
	*header_size = b->block.header_size;
	// The same strm again: liblzma keeps the match finder's memory.
	return lzma_block_encoder(&b->strm, &b->block);
}

int xzblk_code(void *v, const uint8_t *in, size_t in_len,
		size_t *in_used, uint8_t *out, size_t out_len, size_t *out_n,
		int finish)
{
	xzblk *b = v;
	b->strm.next_in = in;
	b->strm.avail_in = in_len;
	b->strm.next_out = out;
	b->strm.avail_out = out_len;
	lzma_ret ret = lzma_code(&b->strm, finish ? LZMA_FINISH : LZMA_RUN);
	*in_used = in_len - b->strm.avail_in;
	*out_n = out_len - b->strm.avail_out;
	// No pointer into the caller's memory outlives the call.
	b->strm.next_in = NULL;
	b->strm.avail_in = 0;
	b->strm.next_out = NULL;
	b->strm.avail_out = 0;
	return ret;
}

int xzblk_header(void *v, uint8_t *hdr, uint64_t *unpadded,
		uint64_t *uncompressed)
{
	xzblk *b = v;
	lzma_ret ret = lzma_block_header_encode(&b->block, hdr);
	if (ret != LZMA_OK)
		return ret;
	*unpadded = lzma_block_unpadded_size(&b->block);
	*uncompressed = b->block.uncompressed_size;
	return *unpadded == 0 ? LZMA_PROG_ERROR : LZMA_OK;
}

void xzblk_end(void *v)
{
	xzblk *b = v;
	lzma_end(&b->strm);
	free(b);
}

int xzs_header(uint8_t *out)
{
	lzma_stream_flags f = { .version = 0, .check = LZMA_CHECK_CRC64 };
	return lzma_stream_header_encode(&f, out);
}

int xzs_tail(const uint64_t *unpadded, const uint64_t *uncompressed,
		size_t n, uint8_t *out, size_t out_len, size_t *out_n)
{
	*out_n = 0;
	lzma_index *i = lzma_index_init(NULL);
	if (i == NULL)
		return LZMA_MEM_ERROR;
	lzma_ret ret = LZMA_OK;
	for (size_t k = 0; k < n && ret == LZMA_OK; k++)
		ret = lzma_index_append(i, NULL, unpadded[k], uncompressed[k]);
	size_t pos = 0;
	if (ret == LZMA_OK)
		ret = lzma_index_buffer_encode(i, out, &pos, out_len);
	lzma_stream_flags f = {
		.version = 0,
		.check = LZMA_CHECK_CRC64,
		.backward_size = lzma_index_size(i),
	};
	lzma_index_end(i, NULL);
	if (ret == LZMA_OK && out_len - pos < LZMA_STREAM_HEADER_SIZE)
		ret = LZMA_BUF_ERROR;
	if (ret == LZMA_OK)
		ret = lzma_stream_footer_encode(&f, out + pos);
	if (ret == LZMA_OK)
		*out_n = pos + LZMA_STREAM_HEADER_SIZE;
	return ret;
}
