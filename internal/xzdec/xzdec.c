//go:build cgo

// Glue between Go and liblzma. The .xz Stream and Block decoders are
// compiled in this translation unit (not in liblzma_common.c) so that
// xzdec_check_failed can tell an integrity check mismatch from other
// corruption: liblzma reports both as LZMA_DATA_ERROR.

#include "upstream/src/liblzma/common/stream_decoder.c"
#include "upstream/src/liblzma/common/block_decoder.c"

#include <stdlib.h>

#include "xzdec.h"

struct xzdec_state {
	lzma_stream strm;
	uint8_t in[XZDEC_INBUF_SIZE];
};

xzdec_new_result
xzdec_new(int format, uint64_t memlimit, int ignore_check)
{
	xzdec_new_result r = { NULL, LZMA_MEM_ERROR };
	xzdec_state *s = malloc(sizeof(*s));
	if (s == NULL)
		return r;

	const lzma_stream init = LZMA_STREAM_INIT;
	s->strm = init;

	switch (format) {
	case XZDEC_FORMAT_XZ:
		// LZMA_CONCATENATED: decode concatenated Streams and Stream
		// Padding like xz -d does, and treat anything else after
		// the last Stream as an error.
		r.ret = lzma_stream_decoder(&s->strm, memlimit,
				LZMA_CONCATENATED
				| (ignore_check ? LZMA_IGNORE_CHECK : 0));
		break;
	case XZDEC_FORMAT_LZMA:
		r.ret = lzma_alone_decoder(&s->strm, memlimit);
		break;
	default:
		r.ret = LZMA_PROG_ERROR;
		break;
	}

	if (r.ret != LZMA_OK) {
		lzma_end(&s->strm);
		free(s);
		return r;
	}

	r.state = s;
	return r;
}

uint8_t *
xzdec_inbuf(xzdec_state *s)
{
	return s->in;
}

xzdec_code_result
xzdec_code(xzdec_state *s, size_t new_in, uint8_t *out, size_t out_len,
		int finish)
{
	xzdec_code_result r;

	if (new_in > 0) {
		s->strm.next_in = s->in;
		s->strm.avail_in = new_in;
	}

	s->strm.next_out = out;
	s->strm.avail_out = out_len;
	r.ret = lzma_code(&s->strm, finish ? LZMA_FINISH : LZMA_RUN);
	r.out_n = out_len - s->strm.avail_out;
	r.avail_in = s->strm.avail_in;

	// out is Go memory: don't keep a pointer to it.
	s->strm.next_out = NULL;
	s->strm.avail_out = 0;
	return r;
}

uint64_t
xzdec_memusage(xzdec_state *s)
{
	return lzma_memusage(&s->strm);
}

int
xzdec_check_failed(xzdec_state *s)
{
	if (s->strm.internal == NULL
			|| s->strm.internal->next.code != &stream_decode)
		return 0;

	const lzma_stream_coder *sc = s->strm.internal->next.coder;
	if (sc->sequence != SEQ_BLOCK_RUN
			|| sc->block_decoder.code != &block_decode)
		return 0;

	// The Block decoder returns LZMA_DATA_ERROR in SEQ_CHECK only when
	// the stored Check differs from the computed one. Compare them again
	// so that a later error (lzma_index_hash_append) isn't mistaken for
	// a mismatch.
	const lzma_block_coder *bc = sc->block_decoder.coder;
	if (bc->sequence != SEQ_CHECK || bc->ignore_check
			|| !lzma_check_is_supported(bc->block->check))
		return 0;

	const uint32_t size = lzma_check_size(bc->block->check);
	return bc->check_pos == size && memcmp(bc->block->raw_check,
			bc->check.buffer.u8, size) != 0;
}

void
xzdec_free(xzdec_state *s)
{
	if (s == NULL)
		return;

	lzma_end(&s->strm);
	free(s);
}
