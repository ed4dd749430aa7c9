package repo

// mdScanner is the XML tokenizer under the rpm-md metadata readers
// (rpmmdparse.go). It accepts and rejects exactly what encoding/xml's
// Decoder.Token accepts and rejects in its default strict mode (the
// readers' results used to come from it, and must not change): the same
// names, attribute syntax, entities, character checks, comments, CDATA
// sections, processing instructions and directives, and end tags that
// must match their start tags. It differs in what it gives back: no
// Token values, no copies. A start tag's local name is reported, then its
// attributes are read one at a time into scratch space; text is decoded
// into scratch space that the next token reuses. Runs of plain ASCII text
// and names are scanned in place, so most bytes cost a table look-up, not
// a method call.
//
// Error messages follow encoding/xml's ("XML syntax error on line N: ...")
// where the cases are the same; the file name is added by the callers.

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type mdTok uint8

const (
	mdNone  mdTok = iota
	mdStart       // a start tag: name() and attributes via attr()
	mdEnd         // an end tag (or the end of a self-closing one)
	mdText        // character data (or a CDATA section) in text
	mdOther       // a comment, processing instruction or directive
)

// mdBufSize is the largest read; a token may be longer (it then spans
// reads).
const mdBufSize = 256 << 10

type mdScanner struct {
	r        io.Reader
	buf      []byte
	pos, end int
	rerr     error // the reader's error (io.EOF at the end), once seen
	err      error // sticky: the first error returned
	lines    int   // newlines before buf[counted]
	counted  int

	text     []byte // decoded text or attribute value of the last token
	scratch  []byte // names being read
	entName  []byte // entity names being read (scratch may hold an attribute's)
	validate bool   // text holds bytes that need encoding/xml's final check

	// The current start tag: its local name (valid until the next token).
	tagLocal []byte
	inTag    bool // attributes not all read yet

	needClose bool   // the last start tag was self-closing: its end is next
	names     []byte // raw names (prefix:local) of the open elements, in a row
	nameEnds  []int  // where each ends in names
}

func newMDScanner(r io.Reader) *mdScanner {
	return &mdScanner{r: r, buf: make([]byte, 4<<10)}
}

// fill reads more input, keeping the last byte read in front so that one
// ungetc is always possible. It reports false when nothing more comes.
func (s *mdScanner) fill() bool {
	if s.rerr != nil {
		return false
	}
	if s.end > 0 {
		// Count the lines of what is dropped; the kept byte has been
		// read (counted stays past it).
		s.line()
		s.counted = 1
		last := s.buf[s.end-1]
		// Reads grow to mdBufSize: small documents stay cheap.
		if len(s.buf) < mdBufSize {
			s.buf = make([]byte, 2*len(s.buf))
		}
		s.buf[0] = last
		s.pos, s.end = 1, 1
	}
	for range 100 {
		n, err := s.r.Read(s.buf[s.end:])
		if n < 0 || n > len(s.buf)-s.end {
			n, err = 0, errors.New("invalid read count")
		}
		s.end += n
		if err != nil {
			s.rerr = err
		}
		if n > 0 {
			return true
		}
		if err != nil {
			return false
		}
	}
	s.rerr = io.ErrNoProgress
	return false
}

// getc reads one byte; false at the end of input or on a read error.
func (s *mdScanner) getc() (byte, bool) {
	if s.pos < s.end {
		b := s.buf[s.pos]
		s.pos++
		return b, true
	}
	return s.getcSlow()
}

//go:noinline
func (s *mdScanner) getcSlow() (byte, bool) {
	if !s.fill() {
		return 0, false
	}
	b := s.buf[s.pos]
	s.pos++
	return b, true
}

// ungetc puts back the byte the last getc returned.
func (s *mdScanner) ungetc(byte) { s.pos-- }

var nl = []byte{'\n'}

// line is the current line (1-based): newlines are counted when asked.
func (s *mdScanner) line() int {
	if s.pos >= s.counted {
		s.lines += bytes.Count(s.buf[s.counted:s.pos], nl)
	} else {
		s.lines -= bytes.Count(s.buf[s.pos:s.counted], nl)
	}
	s.counted = s.pos
	return 1 + s.lines
}

// syntaxError records and returns a syntax error at the current line.
func (s *mdScanner) syntaxError(msg string) error {
	if s.err == nil {
		s.err = &xml.SyntaxError{Msg: msg, Line: s.line()}
	}
	return s.err
}

// eofError is the error for input that ended: a read error as it came,
// the end of input as "unexpected EOF" (mustgetc's rule).
func (s *mdScanner) eofError() error {
	if s.err != nil {
		return s.err
	}
	if s.rerr != nil && s.rerr != io.EOF {
		s.err = s.rerr
		return s.err
	}
	return s.syntaxError("unexpected EOF")
}

// mustgetc reads a byte that must be there.
func (s *mdScanner) mustgetc() (byte, error) {
	if s.pos < s.end {
		b := s.buf[s.pos]
		s.pos++
		return b, nil
	}
	return s.mustgetcSlow()
}

//go:noinline
func (s *mdScanner) mustgetcSlow() (byte, error) {
	b, ok := s.getcSlow()
	if !ok {
		return 0, s.eofError()
	}
	return b, nil
}

func (s *mdScanner) space() {
	for {
		for s.pos < s.end {
			switch s.buf[s.pos] {
			case ' ', '\r', '\n', '\t':
				s.pos++
			default:
				return
			}
		}
		if !s.fill() {
			return
		}
	}
}

// Byte classes for the fast paths.
const (
	cNameByte = 1 << iota // isNameByte
	cNameFirst
	cText // plain in text: no markup, entity, CR, ']' or byte >= 0x80
	cAttr // plain in a quoted value
)

var mdClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		if 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '_' || b == ':' || b == '.' || b == '-' {
			t[c] |= cNameByte
		}
		if 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || b == '_' || b == ':' {
			t[c] |= cNameFirst
		}
		if (b >= 0x20 || b == '\t' || b == '\n') && b < 0x80 && b != '<' && b != '&' && b != ']' {
			t[c] |= cText
			if b != '"' && b != '\'' {
				t[c] |= cAttr
			}
		}
	}
	return
}()

// readName appends a name's bytes to s.scratch (encoding/xml's readName:
// any byte >= 0x80 is taken, validity is checked by the caller). It
// reports false without an error when no name starts here, and false
// with s.err set when the input ends.
func (s *mdScanner) readName() bool {
	b, ok := s.getc()
	if !ok {
		s.eofError()
		return false
	}
	if b < utf8.RuneSelf && mdClass[b]&cNameByte == 0 {
		s.ungetc(b)
		return false
	}
	s.scratch = append(s.scratch, b)
	for {
		// In place while the buffer lasts.
		i := s.pos
		for i < s.end && mdClass[s.buf[i]]&cNameByte != 0 {
			i++
		}
		s.scratch = append(s.scratch, s.buf[s.pos:i]...)
		s.pos = i
		b, ok := s.getc()
		if !ok {
			s.eofError()
			return false
		}
		if b < utf8.RuneSelf && mdClass[b]&cNameByte == 0 {
			s.ungetc(b)
			return true
		}
		s.scratch = append(s.scratch, b)
	}
}

// isMDName is encoding/xml's isName.
func isMDName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	ascii := true
	for _, c := range b {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		// Every byte readName takes is a name byte; only the first
		// has a narrower rule.
		return mdClass[b[0]]&cNameFirst != 0
	}
	// Non-ASCII names are rare: ask encoding/xml itself, whose tables
	// decide (a processing instruction's target is checked with isName
	// and nothing else).
	_, err := xml.NewDecoder(strings.NewReader("<?" + string(b) + "?>")).RawToken()
	return err == nil
}

// name reads a name (encoding/xml's name): false without an error when
// none starts here.
func (s *mdScanner) name() ([]byte, bool) {
	// Fast path: an ASCII name and the byte after it in the buffer.
	if i := s.pos; i < s.end && mdClass[s.buf[i]]&cNameFirst != 0 {
		j := i + 1
		for j < s.end && mdClass[s.buf[j]]&cNameByte != 0 {
			j++
		}
		if j < s.end && s.buf[j] < utf8.RuneSelf {
			s.scratch = append(s.scratch[:0], s.buf[i:j]...)
			s.pos = j
			return s.scratch, true
		}
	}
	s.scratch = s.scratch[:0]
	if !s.readName() {
		return nil, false
	}
	if !isMDName(s.scratch) {
		s.syntaxError("invalid XML name: " + string(s.scratch))
		return nil, false
	}
	return s.scratch, true
}

// nsname reads a name with at most one colon and returns it whole and
// its local part.
func (s *mdScanner) nsname() (raw, local []byte, ok bool) {
	b, ok := s.name()
	if !ok {
		return nil, nil, false
	}
	i := -1
	for k, c := range b {
		if c == ':' {
			if i >= 0 {
				return nil, nil, false // more than one colon
			}
			i = k
		}
	}
	if i > 0 && i < len(b)-1 {
		return b, b[i+1:], true
	}
	return b, b, true
}

// next reads the next token. After mdStart the caller reads the
// attributes (attr) or lets next skip them. At the end of input it
// returns mdNone with io.EOF; errors are sticky.
func (s *mdScanner) next() (mdTok, error) {
	if s.err != nil {
		return mdNone, s.err
	}
	if s.inTag {
		for {
			_, _, more, err := s.attr()
			if err != nil {
				return mdNone, err
			}
			if !more {
				break
			}
		}
	}
	if s.needClose {
		s.needClose = false
		s.pop()
		return mdEnd, nil
	}
	b, ok := s.getc()
	if !ok {
		if s.rerr != nil && s.rerr != io.EOF {
			s.err = s.rerr
			return mdNone, s.err
		}
		if len(s.nameEnds) > 0 {
			return mdNone, s.syntaxError("unexpected EOF")
		}
		return mdNone, io.EOF
	}
	if b != '<' {
		s.ungetc(b)
		if err := s.readText(-1, false); err != nil {
			return mdNone, err
		}
		return mdText, nil
	}
	b, err := s.mustgetc()
	if err != nil {
		return mdNone, err
	}
	switch b {
	case '/':
		raw, _, ok := s.nsname()
		if !ok {
			if s.err == nil {
				s.syntaxError("expected element name after </")
			}
			return mdNone, s.err
		}
		s.space()
		if b, err = s.mustgetc(); err != nil {
			return mdNone, err
		}
		if b != '>' {
			return mdNone, s.syntaxError("invalid characters between </" + localOf(string(raw)) + " and >")
		}
		return s.popElement(raw)
	case '?':
		return s.procInst()
	case '!':
		return s.bang()
	}
	s.ungetc(b)
	raw, local, ok := s.nsname()
	if !ok {
		if s.err == nil {
			s.syntaxError("expected element name after <")
		}
		return mdNone, s.err
	}
	s.names = append(s.names, raw...)
	s.nameEnds = append(s.nameEnds, len(s.names))
	s.tagLocal = s.names[len(s.names)-len(local):]
	s.inTag = true
	return mdStart, nil
}

func localOf(raw string) string {
	if i := strings.IndexByte(raw, ':'); i > 0 && i < len(raw)-1 {
		return raw[i+1:]
	}
	return raw
}

// top is the raw name of the innermost open element.
func (s *mdScanner) top() []byte {
	start := 0
	if n := len(s.nameEnds); n > 1 {
		start = s.nameEnds[n-2]
	}
	return s.names[start:]
}

func (s *mdScanner) pop() {
	s.nameEnds = s.nameEnds[:len(s.nameEnds)-1]
	end := 0
	if n := len(s.nameEnds); n > 0 {
		end = s.nameEnds[n-1]
	}
	s.names = s.names[:end]
}

// popElement closes the innermost element, which must be raw (encoding/xml
// compares local name and prefix).
func (s *mdScanner) popElement(raw []byte) (mdTok, error) {
	if len(s.nameEnds) == 0 {
		return mdNone, s.syntaxError("unexpected end element </" + localOf(string(raw)) + ">")
	}
	if top := s.top(); string(top) != string(raw) {
		t, r := localOf(string(top)), localOf(string(raw))
		if t != r {
			return mdNone, s.syntaxError("element <" + t + "> closed by </" + r + ">")
		}
		return mdNone, s.syntaxError("element <" + t + "> closed by </" + r + "> in another name space")
	}
	s.pop()
	return mdEnd, nil
}

// attr reads the current start tag's next attribute: its local name and
// its decoded value (both valid until the next call). more is false at
// the end of the tag.
func (s *mdScanner) attr() (local, value []byte, more bool, err error) {
	if !s.inTag {
		return nil, nil, false, nil
	}
	s.space()
	b, err := s.mustgetc()
	if err != nil {
		return nil, nil, false, err
	}
	if b == '/' {
		if b, err = s.mustgetc(); err != nil {
			return nil, nil, false, err
		}
		if b != '>' {
			return nil, nil, false, s.syntaxError("expected /> in element")
		}
		s.inTag, s.needClose = false, true
		return nil, nil, false, nil
	}
	if b == '>' {
		s.inTag = false
		return nil, nil, false, nil
	}
	s.ungetc(b)
	_, local, ok := s.nsname()
	if !ok {
		if s.err == nil {
			s.syntaxError("expected attribute name in element")
		}
		return nil, nil, false, s.err
	}
	s.space()
	if b, err = s.mustgetc(); err != nil {
		return nil, nil, false, err
	}
	if b != '=' {
		return nil, nil, false, s.syntaxError("attribute name without = in element")
	}
	s.space()
	if b, err = s.mustgetc(); err != nil {
		return nil, nil, false, err
	}
	if b != '"' && b != '\'' {
		return nil, nil, false, s.syntaxError("unquoted or missing attribute value in element")
	}
	// local lives in s.scratch, the value in s.text: both survive until
	// the next call.
	if err := s.readText(int(b), false); err != nil {
		return nil, nil, false, err
	}
	return local, s.text, true, nil
}

// readText is encoding/xml's text: character data up to '<' (quote < 0),
// a quoted value up to its quote, or a CDATA section up to "]]>", decoded
// into s.text.
func (s *mdScanner) readText(quote int, cdata bool) error {
	s.text = s.text[:0]
	s.validate = false
	var b0, b1 byte
	trunc := 0
	class := uint8(cText)
	if quote >= 0 {
		class = cAttr
	}
	if cdata {
		class = 0 // no fast path
	}
Input:
	for {
		// Fast path: plain bytes in place.
		if class != 0 && b1 != '\r' && b1 != ']' && s.pos < s.end && mdClass[s.buf[s.pos]]&class != 0 {
			i := s.pos
			for i < s.end {
				c := s.buf[i]
				if mdClass[c]&class == 0 {
					break
				}
				i++
			}
			s.text = append(s.text, s.buf[s.pos:i]...)
			// ']' and '\r' are never plain: the checks below only look
			// for them in b0 and b1.
			b0, b1 = 0, s.buf[i-1]
			s.pos = i
			continue
		}
		b, ok := s.getc()
		if !ok {
			if s.rerr != nil && s.rerr != io.EOF {
				s.err = s.rerr
				return s.err
			}
			if cdata {
				return s.syntaxError("unexpected EOF in CDATA section")
			}
			break Input
		}
		if quote < 0 && b0 == ']' && b1 == ']' && b == '>' {
			if cdata {
				trunc = 2
				break Input
			}
			return s.syntaxError("unescaped ]]> not in CDATA section")
		}
		if b == '<' && !cdata {
			if quote >= 0 {
				return s.syntaxError("unescaped < inside quoted string")
			}
			s.ungetc('<')
			break Input
		}
		if quote >= 0 && b == byte(quote) {
			break Input
		}
		if b == '&' && !cdata {
			if err := s.entity(); err != nil {
				return err
			}
			b0, b1 = 0, 0
			continue Input
		}
		if b == '\r' {
			s.text = append(s.text, '\n')
		} else if b1 == '\r' && b == '\n' {
			// \r\n: the \n is already there.
		} else {
			s.text = append(s.text, b)
			if b >= utf8.RuneSelf || b < 0x20 && b != '\t' && b != '\n' {
				s.validate = true
			}
		}
		b0, b1 = b1, b
	}
	s.text = s.text[:len(s.text)-trunc]
	if s.validate {
		buf := s.text
		for len(buf) > 0 {
			r, size := utf8.DecodeRune(buf)
			if r == utf8.RuneError && size == 1 {
				return s.syntaxError("invalid UTF-8")
			}
			buf = buf[size:]
			if !isInCharacterRange(r) {
				return s.syntaxError(fmt.Sprintf("illegal character code %U", r))
			}
		}
	}
	return nil
}

// entity decodes a character reference after its '&' (encoding/xml's
// rules in strict mode: the five predefined names, &#N; and &#xN; up to
// U+10FFFF) and appends it to s.text.
func (s *mdScanner) entity() error {
	b, err := s.mustgetc()
	if err != nil {
		return err
	}
	var text string
	have := false
	var ent []byte // for the message
	if b == '#' {
		if b, err = s.mustgetc(); err != nil {
			return err
		}
		base := 10
		ent = append(ent, '&', '#')
		if b == 'x' {
			base = 16
			ent = append(ent, 'x')
			if b, err = s.mustgetc(); err != nil {
				return err
			}
		}
		start := len(ent)
		for '0' <= b && b <= '9' || base == 16 && ('a' <= b && b <= 'f' || 'A' <= b && b <= 'F') {
			ent = append(ent, b)
			if b, err = s.mustgetc(); err != nil {
				return err
			}
		}
		if b != ';' {
			s.ungetc(b)
		} else {
			digits := string(ent[start:])
			ent = append(ent, ';')
			n, err := strconv.ParseUint(digits, base, 64)
			if err == nil && n <= unicode.MaxRune {
				text, have = string(rune(n)), true
				s.validate = true
			}
		}
	} else {
		s.ungetc(b)
		saved := s.scratch
		s.scratch = s.entName[:0]
		ok := s.readName()
		name := s.scratch
		s.entName, s.scratch = s.scratch, saved
		if !ok && s.err != nil {
			return s.err
		}
		ent = append(append(ent, '&'), name...)
		if b, err = s.mustgetc(); err != nil {
			return err
		}
		if b != ';' {
			s.ungetc(b)
		} else {
			ent = append(ent, ';')
			if isMDName(name) {
				switch string(name) {
				case "lt":
					text, have = "<", true
				case "gt":
					text, have = ">", true
				case "amp":
					text, have = "&", true
				case "apos":
					text, have = "'", true
				case "quot":
					text, have = `"`, true
				}
			}
		}
	}
	if have {
		s.text = append(s.text, text...)
		return nil
	}
	e := string(ent)
	if e[len(e)-1] != ';' {
		e += " (no semicolon)"
	}
	return s.syntaxError("invalid character entity " + e)
}

// isInCharacterRange is encoding/xml's: the Char production of XML 1.0.
func isInCharacterRange(r rune) bool {
	return r == 0x09 ||
		r == 0x0A ||
		r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// procInst reads a processing instruction after "<?". The XML
// declaration's version must be 1.0; a declared encoding is accepted and
// the bytes are read as they are (the readers' CharsetReader passes every
// charset through).
func (s *mdScanner) procInst() (mdTok, error) {
	target, ok := s.name()
	if !ok {
		if s.err == nil {
			s.syntaxError("expected target name after <?")
		}
		return mdNone, s.err
	}
	isXML := string(target) == "xml"
	s.space()
	s.text = s.text[:0]
	var b0 byte
	for {
		b, err := s.mustgetc()
		if err != nil {
			return mdNone, err
		}
		if isXML {
			s.text = append(s.text, b)
		}
		if b0 == '?' && b == '>' {
			break
		}
		b0 = b
	}
	if isXML {
		content := string(s.text[:len(s.text)-2])
		if ver := procInstParam("version", content); ver != "" && ver != "1.0" {
			s.err = fmt.Errorf("xml: unsupported version %q; only version 1.0 is supported", ver)
			return mdNone, s.err
		}
	}
	return mdOther, nil
}

// procInstParam is encoding/xml's procInst.
func procInstParam(param, s string) string {
	param = param + "="
	lenp := len(param)
	i := 0
	var sep byte
	for i < len(s) {
		sub := s[i:]
		k := strings.Index(sub, param)
		if k < 0 || lenp+k >= len(sub) {
			return ""
		}
		i += lenp + k + 1
		if c := sub[lenp+k]; c == '\'' || c == '"' {
			sep = c
			break
		}
	}
	if sep == 0 {
		return ""
	}
	j := strings.IndexByte(s[i:], sep)
	if j < 0 {
		return ""
	}
	return s[i : i+j]
}

// bang reads what follows "<!": a comment, a CDATA section (an mdText
// token) or a directive.
func (s *mdScanner) bang() (mdTok, error) {
	b, err := s.mustgetc()
	if err != nil {
		return mdNone, err
	}
	switch b {
	case '-':
		if b, err = s.mustgetc(); err != nil {
			return mdNone, err
		}
		if b != '-' {
			return mdNone, s.syntaxError("invalid sequence <!- not part of <!--")
		}
		var b0, b1 byte
		for {
			if b, err = s.mustgetc(); err != nil {
				return mdNone, err
			}
			if b0 == '-' && b1 == '-' {
				if b != '>' {
					return mdNone, s.syntaxError(`invalid sequence "--" not allowed in comments`)
				}
				return mdOther, nil
			}
			b0, b1 = b1, b
		}
	case '[':
		for i := 0; i < 6; i++ {
			if b, err = s.mustgetc(); err != nil {
				return mdNone, err
			}
			if b != "CDATA["[i] {
				return mdNone, s.syntaxError("invalid <![ sequence")
			}
		}
		if err := s.readText(-1, true); err != nil {
			return mdNone, err
		}
		return mdText, nil
	}
	// A directive (<!DOCTYPE ...>): skipped as encoding/xml delimits it.
	// Quoted angle brackets do not count for nesting.
	inquote := byte(0)
	depth := 0
	for {
		if b, err = s.mustgetc(); err != nil {
			return mdNone, err
		}
		if inquote == 0 && b == '>' && depth == 0 {
			return mdOther, nil
		}
	HandleB:
		switch {
		case b == inquote:
			inquote = 0
		case inquote != 0:
		case b == '\'' || b == '"':
			inquote = b
		case b == '>' && inquote == 0:
			depth--
		case b == '<' && inquote == 0:
			const open = "!--"
			for i := 0; i < len(open); i++ {
				if b, err = s.mustgetc(); err != nil {
					return mdNone, err
				}
				if b != open[i] {
					depth++
					goto HandleB
				}
			}
			var b0, b1 byte
			for {
				if b, err = s.mustgetc(); err != nil {
					return mdNone, err
				}
				if b0 == '-' && b1 == '-' && b == '>' {
					break
				}
				b0, b1 = b1, b
			}
		}
	}
}

// skip reads to the end of the element whose start tag was just read.
func (s *mdScanner) skip() error {
	depth := 0
	for {
		tok, err := s.next()
		if err != nil {
			return err
		}
		switch tok {
		case mdStart:
			depth++
		case mdEnd:
			if depth == 0 {
				return nil
			}
			depth--
		}
	}
}
