// The C interface of the encoder (xzenc.c): one call compresses a whole
// buffer. Go memory is used during the call only: liblzma's worker
// threads read copies of the input that the calling thread makes, and
// every thread has ended when the call returns.

#ifndef XZENC_H
#define XZENC_H

#include <stddef.h>
#include <stdint.h>

// xzenc_encode compresses in[0:in_len] into out[0:out_len] as one .xz
// Stream (CRC64) of independent Blocks of block_size bytes, each
// compressed with preset by one of up to threads threads, and sets
// *out_n. It returns an lzma_ret: LZMA_OK (0) when the Stream is
// complete, LZMA_BUF_ERROR when out is too small.
int xzenc_encode(const uint8_t *in, size_t in_len, uint8_t *out,
		size_t out_len, size_t *out_n, uint32_t preset,
		uint64_t block_size, uint32_t threads);

// xzenc_new starts the same Stream as xzenc_encode, to be given its
// input in pieces (xzenc_code) and ended with xzenc_end: an lzma_stream
// in C memory, opaque here; NULL, with *ret the lzma_ret, when liblzma
// refuses.
void *xzenc_new(uint32_t preset, uint64_t block_size, uint32_t threads,
		int *ret);

// xzenc_code runs lzma_code once on in[0:in_len] (LZMA_RUN, or with finish
// LZMA_FINISH) into out[0:out_len], and sets how much of each was used.
// It returns the lzma_ret (LZMA_STREAM_END once a finished Stream is
// whole). Neither buffer is referred to after it returns.
int xzenc_code(void *strm, const uint8_t *in, size_t in_len,
		size_t *in_used, uint8_t *out, size_t out_len, size_t *out_n,
		int finish);

// xzenc_end frees the encoder and its threads.
void xzenc_end(void *strm);

#endif
