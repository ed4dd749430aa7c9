// Hand-written replacement for the config.h that xz-utils' configure
// script generates. It enables only what the vendored subset of liblzma
// (upstream/) needs: every decoder, the LZMA2 encoder and the threaded
// .xz encoder (POSIX threads), no assembler, no CLMUL CRC (the table-based
// CRC32/CRC64 code is used on every CPU).
//
// sysdefs.h includes this file as <config.h> because the cgo CFLAGS in
// xzdec_cgo.go define HAVE_CONFIG_H and put this directory on the include
// path.

#ifndef XZDEC_CONFIG_H
#define XZDEC_CONFIG_H

#include "xzdec_names.h"

// Decoders. The .xz container may use every filter of the xz format, so
// all of liblzma's filter decoders are built; LZMA1 serves .lzma files.
#define HAVE_DECODERS 1
#define HAVE_DECODER_LZMA1 1
#define HAVE_DECODER_LZMA2 1
#define HAVE_DECODER_DELTA 1
#define HAVE_DECODER_X86 1
#define HAVE_DECODER_POWERPC 1
#define HAVE_DECODER_IA64 1
#define HAVE_DECODER_ARM 1
#define HAVE_DECODER_ARMTHUMB 1
#define HAVE_DECODER_ARM64 1
#define HAVE_DECODER_SPARC 1

// Encoders: LZMA2 only, for the threaded .xz Stream encoder (xzenc.c).
// The BCJ and Delta filters are not encoded (filter_encoder.c leaves them
// out without these macros).
#define HAVE_ENCODERS 1
#define HAVE_ENCODER_LZMA2 1

// Every match finder, as configure's default (--enable-match-finders):
// the presets use hc3 (-0 ... -3's), hc4 and bt4.
#define HAVE_MF_HC3 1
#define HAVE_MF_HC4 1
#define HAVE_MF_BT2 1
#define HAVE_MF_BT3 1
#define HAVE_MF_BT4 1

// No threads (mythread.h): the encoder's Blocks run on Go's goroutines
// (xzenc.go), each with a Block encoder of its own.

// Integrity checks (CRC32 is always built; the others are optional).
#define HAVE_CHECK_CRC32 1
#define HAVE_CHECK_CRC64 1
#define HAVE_CHECK_SHA256 1

// C99 headers and compiler features (cgo needs GCC or Clang).
#define HAVE_STDBOOL_H 1
#define HAVE__BOOL 1
#define HAVE_STDINT_H 1
#define HAVE_INTTYPES_H 1
#define HAVE___BUILTIN_BSWAPXX 1
#define HAVE___BUILTIN_ASSUME_ALIGNED 1

// Don't give the liblzma symbols default visibility: they are linked
// statically into the Go binary and are not an exported API.
#define HAVE_VISIBILITY 0

#define SIZEOF_SIZE_T __SIZEOF_SIZE_T__

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#	define WORDS_BIGENDIAN 1
#endif

// configure (m4/tuklib_integer.m4) enables this on x86, PowerPC and on ARM
// when the compiler says unaligned access is supported.
#if defined(__i386__) || defined(__x86_64__) || defined(__powerpc__) \
		|| defined(__powerpc64__) \
		|| ((defined(__arm__) || defined(__aarch64__)) \
			&& defined(__ARM_FEATURE_UNALIGNED))
#	define TUKLIB_FAST_UNALIGNED_ACCESS 1
#endif

#endif
