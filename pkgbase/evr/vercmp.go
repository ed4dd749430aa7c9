package evr

// Vercmp compares two version (or release) strings the way rpmvercmp does
// and returns -1 if a is older than b, 0 if they are equal and 1 if a is
// newer.
//
// The strings are split into maximal runs of ASCII digits or ASCII letters;
// everything else separates runs and only matters through '~' and '^':
//   - '~' sorts before everything, even the end of the string
//     ("1.0~rc1" < "1.0");
//   - '^' sorts after the end of the string but before any other run
//     ("1.0" < "1.0^git1" < "1.0.1"), as in rpm >= 4.15;
//   - numeric runs compare as numbers of any length (leading zeros are
//     ignored, the longer number wins);
//   - alphabetic runs compare bytewise;
//   - when one string has more runs left after all shared runs compare
//     equal, it is the newer one.
//
// The semantics differ in one place only, when a numeric run meets an
// alphabetic one: upstream rpm makes the numeric run newer, ALT makes the
// alphabetic run newer ("xyz.4" > "8", "10xyz" > "10.1xyz" under ALT).
//
// Vercmp does not allocate: it only indexes and slices its arguments, so
// a resolver may call it millions of times.
func Vercmp(sem Semantics, a, b string) int {
	if a == b {
		return 0
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		for i < len(a) && !isSegByte(a[i]) {
			i++
		}
		for j < len(b) && !isSegByte(b[j]) {
			j++
		}
		ca, cb := byteAt(a, i), byteAt(b, j)

		// Tilde sorts before everything else, including the end.
		if ca == '~' || cb == '~' {
			if ca != '~' {
				return 1
			}
			if cb != '~' {
				return -1
			}
			i++
			j++
			continue
		}

		// Caret is like tilde except that the end of the string (the
		// base version) sorts before it.
		if ca == '^' || cb == '^' {
			if i >= len(a) {
				return -1
			}
			if j >= len(b) {
				return 1
			}
			if ca != '^' {
				return 1
			}
			if cb != '^' {
				return -1
			}
			i++
			j++
			continue
		}

		// One of them ran out: the loop is over.
		if i >= len(a) || j >= len(b) {
			break
		}

		// Take the run of a's kind from both strings.
		si, sj := i, j
		isnum := isDigit(a[i])
		if isnum {
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
		} else {
			for i < len(a) && isAlpha(a[i]) {
				i++
			}
			for j < len(b) && isAlpha(b[j]) {
				j++
			}
		}

		// b has a run of the other kind here. Upstream: numeric is newer
		// (rpm bugzilla #50977); ALT: alphabetic is newer.
		if j == sj {
			if isnum == (sem != ALT) {
				return 1
			}
			return -1
		}

		sa, sb := a[si:i], b[sj:j]
		if isnum {
			for len(sa) > 0 && sa[0] == '0' {
				sa = sa[1:]
			}
			for len(sb) > 0 && sb[0] == '0' {
				sb = sb[1:]
			}
			// The number with more digits is the bigger one; this also
			// works for numbers that overflow every integer type.
			if len(sa) != len(sb) {
				if len(sa) > len(sb) {
					return 1
				}
				return -1
			}
		}
		if sa != sb {
			if sa < sb {
				return -1
			}
			return 1
		}
	}

	// All runs compared equal; separators may still differ.
	if i >= len(a) && j >= len(b) {
		return 0
	}
	// Whichever still has a run left is newer.
	if i >= len(a) {
		return -1
	}
	return 1
}

// byteAt returns s[i], or 0 past the end (C's terminating NUL).
func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// The character classes are ASCII-only, like rpm's risdigit/risalpha, so
// the result never depends on the locale.
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlpha(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

// isSegByte reports whether c starts something the comparison looks at:
// a digit, a letter, '~' or '^'. Everything else is a separator.
func isSegByte(c byte) bool { return isDigit(c) || isAlpha(c) || c == '~' || c == '^' }
