// The small C interface between xzdec_cgo.go and the vendored liblzma
// (xzdec.c). The Go side never stores a Go pointer in C memory: the output
// buffer is handed to xzdec_code for the duration of one call only, and
// the input is copied into the C-allocated buffer returned by xzdec_inbuf.

#ifndef XZDEC_H
#define XZDEC_H

#include <stddef.h>
#include <stdint.h>

// Size of the C input buffer of every decoder.
#define XZDEC_INBUF_SIZE (64 * 1024)

// Formats, as the Go constants XZ and LZMA.
#define XZDEC_FORMAT_XZ 0
#define XZDEC_FORMAT_LZMA 1

typedef struct xzdec_state xzdec_state;

typedef struct {
	xzdec_state *state; // NULL if ret isn't LZMA_OK
	int ret;            // lzma_ret of the initialisation
} xzdec_new_result;

typedef struct {
	int ret;         // lzma_ret of lzma_code
	size_t out_n;    // bytes written to out
	size_t avail_in; // input bytes not consumed yet
} xzdec_code_result;

// xzdec_new allocates a decoder for format with the given memory limit;
// ignore_check non-zero skips the .xz integrity checks (LZMA_IGNORE_CHECK).
xzdec_new_result xzdec_new(int format, uint64_t memlimit, int ignore_check);

// xzdec_inbuf returns the decoder's input buffer of XZDEC_INBUF_SIZE bytes.
uint8_t *xzdec_inbuf(xzdec_state *s);

// xzdec_code runs lzma_code once. new_in > 0 says that the caller has put
// new_in bytes at the start of the input buffer, which it may do only when
// avail_in was 0. out is used only during the call. finish is non-zero
// once the input has ended.
xzdec_code_result xzdec_code(xzdec_state *s, size_t new_in, uint8_t *out,
		size_t out_len, int finish);

// xzdec_memusage returns the memory the stream needs (for a
// LZMA_MEMLIMIT_ERROR message).
uint64_t xzdec_memusage(xzdec_state *s);

// xzdec_check_failed tells whether the LZMA_DATA_ERROR just returned by an
// .xz decoder is an integrity check mismatch of a Block.
int xzdec_check_failed(xzdec_state *s);

// xzdec_free frees the decoder; s may be NULL.
void xzdec_free(xzdec_state *s);

#endif
