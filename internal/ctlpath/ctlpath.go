// Package ctlpath is the one rule by which control files write a dataset
// path as a line, and read it back; and the documents of such lines the
// command line writes (docs.go: warmup, drop and refresh lists, split to
// fit a control file, and the path lists of warmup -f).
//
// A path that is a plain line is written as it is. A path that is not (it
// holds a newline or another control character, bytes that are not UTF-8,
// a Unicode line separator, or it starts with '#' or '"', or starts or ends
// with white space) is written in double quotes with C escapes, as git
// quotes unusual file names:
//
//	\n \t \r \a \b \f \v  the control characters of those names
//	\" \\                 a quote and a backslash
//	\NNN                  any other byte, three octal digits
//
// Readers of ctl files (next, and the paths of warmup, refresh and verify)
// unquote every line that starts with '"'; any other line is the path
// itself, backslashes included. So every name that worked before quoting
// existed still works, and the quoting of a name never depends on the file
// it is written to.
package ctlpath

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrBadQuote marks a quoted line that does not decode.
var ErrBadQuote = errors.New("ctlpath: bad quoted path")

// NeedsQuote reports whether p cannot be written as a plain line.
func NeedsQuote(p string) bool {
	if p == "" {
		return false
	}
	if p[0] == '#' || p[0] == '"' {
		return true
	}
	if r, _ := utf8.DecodeRuneInString(p); unicode.IsSpace(r) {
		return true
	}
	if r, _ := utf8.DecodeLastRuneInString(p); unicode.IsSpace(r) {
		return true
	}
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(p[i:])
		if odd(r, n) {
			return true
		}
		i += n
	}
	return false
}

// odd reports a non-ASCII rune of n bytes that a plain line must not hold:
// a byte that is not UTF-8, a C1 control character, or a character that
// Python's str.splitlines (and other line readers) take for a line end.
func odd(r rune, n int) bool {
	return r == utf8.RuneError && n == 1 || unicode.IsControl(r) || r == 0x2028 || r == 0x2029
}

// Quote returns p as one line: p itself when it is a plain line, else p
// quoted.
func Quote(p string) string {
	if !NeedsQuote(p) {
		return p
	}
	var b strings.Builder
	b.Grow(len(p) + 8)
	b.WriteByte('"')
	for i := 0; i < len(p); {
		c := p[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(p[i:])
			if odd(r, n) {
				for j := 0; j < n; j++ {
					octal(&b, p[i+j])
				}
			} else {
				b.WriteString(p[i : i+n])
			}
			i += n
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\v':
			b.WriteString(`\v`)
		default:
			if c < 0x20 || c == 0x7f {
				octal(&b, c)
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
	return b.String()
}

func octal(b *strings.Builder, c byte) {
	b.WriteByte('\\')
	b.WriteByte('0' + c>>6)
	b.WriteByte('0' + c>>3&7)
	b.WriteByte('0' + c&7)
}

// Unquote returns the path a line names: the line itself, or, when it
// starts with '"', its decoded contents. The caller trims the line's white
// space and recognises its own keywords and comments first. A quoted path
// that is empty or holds a NUL byte is an error.
func Unquote(line string) (string, error) {
	if line == "" || line[0] != '"' {
		return line, nil
	}
	if len(line) < 2 || line[len(line)-1] != '"' {
		return "", fmt.Errorf("%w %s: no closing quote", ErrBadQuote, clip(line))
	}
	body := line[1 : len(line)-1]
	var b strings.Builder
	b.Grow(len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch c {
		case '"':
			return "", fmt.Errorf("%w %s: a quote inside must be written \\\"", ErrBadQuote, clip(line))
		case '\\':
		default:
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(body) {
			return "", fmt.Errorf("%w %s: it ends in a lone backslash", ErrBadQuote, clip(line))
		}
		i++
		switch e := body[i]; e {
		case '"', '\\':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3':
			if i+2 >= len(body) || !isOctal(body[i+1]) || !isOctal(body[i+2]) {
				return "", fmt.Errorf("%w %s: \\%c: want three octal digits", ErrBadQuote, clip(line), e)
			}
			b.WriteByte((e-'0')<<6 | (body[i+1]-'0')<<3 | (body[i+2] - '0'))
			i += 2
		default:
			return "", fmt.Errorf("%w %s: unknown escape \\%c (want \\n \\t \\r \\a \\b \\f \\v \\\" \\\\ or \\NNN)", ErrBadQuote, clip(line), e)
		}
	}
	p := b.String()
	switch {
	case p == "":
		return "", fmt.Errorf("%w %s: empty", ErrBadQuote, clip(line))
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w %s: a path cannot hold a NUL byte", ErrBadQuote, clip(line))
	}
	return p, nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// clip quotes a line for an error message, shortened.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}
