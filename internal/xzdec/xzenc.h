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

#endif
