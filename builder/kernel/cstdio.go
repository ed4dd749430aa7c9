package kernel

import "bytes"

// depmod reads its text inputs with fgets into PATH_MAX buffers and
// getc loops; these helpers reproduce those reads so that odd input
// (long lines, embedded NULs, a missing final newline) is treated the same.

// fgetsChunks splits b into the pieces successive fgets(buf, 4096) calls
// return: up to and including a newline, at most 4095 bytes each.
func fgetsChunks(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := min(len(b), pathMax-1)
		if i := bytes.IndexByte(b[:n], '\n'); i >= 0 {
			n = i + 1
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// cString is a buffer as C's string functions see it: up to the first NUL.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// cStream is a FILE read with fgetc, with its end-of-file flag.
type cStream struct {
	b   []byte
	pos int
	eof bool
}

func (s *cStream) getc() int {
	if s.pos >= len(s.b) {
		s.eof = true
		return -1
	}
	c := s.b[s.pos]
	s.pos++
	return int(c)
}

// flushTo is depmod's flush_stream_to with a PATH_MAX buffer: it reads up
// to end, NUL or EOF and returns what it read only if it stopped at end.
func (s *cStream) flushTo(end int) string {
	var dst []byte
	c := s.getc()
	for c != -1 && c != end && c != 0 && len(dst) < pathMax {
		dst = append(dst, byte(c))
		c = s.getc()
	}
	if len(dst) == pathMax {
		dst = dst[:pathMax-1] // depmod truncates the last byte
	}
	if c != end {
		return ""
	}
	return string(dst)
}

// flush is depmod's flush_stream: skip to end, NUL or EOF.
func (s *cStream) flush(end int) {
	for c := s.getc(); c != -1 && c != end && c != 0; c = s.getc() {
	}
}

// scanMajorMinor is sscanf(s, prefix "%u-%u", &a, &b) == 2 under glibc.
func scanMajorMinor(s, prefix string) (uint32, uint32, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return 0, 0, false
	}
	a, rest, ok := scanUnsigned(s[len(prefix):])
	if !ok || rest == "" || rest[0] != '-' {
		return 0, 0, false
	}
	b, _, ok := scanUnsigned(rest[1:])
	return a, b, ok
}

// scanUnsigned is scanf's %u: optional white space and sign, decimal
// digits, strtoul's saturation on overflow, truncation to unsigned int.
func scanUnsigned(s string) (uint32, string, bool) {
	for len(s) > 0 && (s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r')) {
		s = s[1:]
	}
	neg := false
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v uint64
	n, over := 0, false
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		d := uint64(s[n] - '0')
		if v > (^uint64(0)-d)/10 {
			over = true
		}
		v = v*10 + d
		n++
	}
	if n == 0 {
		return 0, s, false
	}
	switch {
	case over:
		v = ^uint64(0)
	case neg:
		v = -v
	}
	return uint32(v), s[n:], true
}
