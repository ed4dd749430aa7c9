// The C interface of the encoder (xzenc.c): one Block encoder, run by
// one Go goroutine over the Blocks it is given, and the Stream's header,
// Index and footer. Go memory is used during a call only, and no thread
// other than the caller's runs liblzma.

#ifndef XZENC_H
#define XZENC_H

#include <stddef.h>
#include <stdint.h>

// xzblk_new makes a Block encoder of preset (LZMA2, CRC64): C memory,
// opaque here; NULL, with *ret the lzma_ret, when liblzma refuses.
void *xzblk_new(uint32_t preset, int *ret);

// xzblk_start begins a Block of a Stream whose Blocks hold block_size
// bytes (this one may hold fewer) and sets the size of its header, as
// liblzma's threaded encoder reserves it: for block_size bytes and the
// largest compressed size it allows (*bound). It returns an lzma_ret.
int xzblk_start(void *b, uint64_t block_size, uint32_t *header_size,
		uint64_t *bound);

// xzblk_code runs the Block encoder once on in[0:in_len] (with finish,
// to the Block's end) into out[0:out_len], and sets how much of each was
// used. It returns the lzma_ret: LZMA_STREAM_END once a finished Block is
// whole. Neither buffer is referred to after it returns.
int xzblk_code(void *b, const uint8_t *in, size_t in_len,
		size_t *in_used, uint8_t *out, size_t out_len, size_t *out_n,
		int finish);

// xzblk_header writes the header of the Block just ended into
// hdr[0:header_size], with its sizes, and sets the Index's sizes of it.
int xzblk_header(void *b, uint8_t *hdr, uint64_t *unpadded,
		uint64_t *uncompressed);

// xzblk_end frees the encoder.
void xzblk_end(void *b);

// xzs_header writes the 12-byte Stream Header (CRC64).
int xzs_header(uint8_t *out);

// xzs_tail writes the Index of n Blocks and the Stream Footer into
// out[0:out_len] and sets *out_n.
int xzs_tail(const uint64_t *unpadded, const uint64_t *uncompressed,
		size_t n, uint8_t *out, size_t out_len, size_t *out_n);

#endif
