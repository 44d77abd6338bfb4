package cli

import (
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// Model output is text a program did not choose: printed raw, its
// control characters (an ESC starts a terminal's escape sequences) act on
// the terminal. Printable and Escaper write them as Go escapes instead
// (\x1b, \r, \u009b), and invalid UTF-8 bytes as \xNN; new lines and tabs
// stay.

// Printable is s with its control characters and invalid bytes escaped.
func Printable(s string) string { return string(appendEscaped(nil, []byte(s))) }

// appendEscaped appends b escaped to dst. A character cut at b's end is
// escaped byte by byte: Escaper keeps it for the next write instead.
func appendEscaped(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n == 1:
			dst = fmt.Appendf(dst, `\x%02x`, b[0])
		case r == '\n' || r == '\t':
			dst = append(dst, b[0])
		case r == '\r':
			dst = append(dst, `\r`...)
		case r < 0x20 || r == 0x7f:
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f: // C1 controls: U+009B is a CSI
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, b[:n]...)
		}
		b = b[n:]
	}
	return dst
}

// Escaper writes to W what it is given, escaped as Printable does, for
// text streamed in pieces (a token at a time): a character split between
// two writes is held until the next one, or Flush.
type Escaper struct {
	W    io.Writer
	tail []byte // the start of a character cut by the last write
}

// Write escapes p (with what the last write held) and writes it; it
// reports len(p) written when the underlying write succeeds.
func (e *Escaper) Write(p []byte) (int, error) {
	b := append(e.tail, p...)
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	e.tail = append([]byte(nil), b[cut:]...)
	if _, err := e.W.Write(appendEscaped(nil, b[:cut])); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what Write held back (an incomplete character), escaped.
func (e *Escaper) Flush() error {
	if len(e.tail) == 0 {
		return nil
	}
	_, err := e.W.Write(appendEscaped(nil, e.tail))
	e.tail = nil
	return err
}

// IsTerminal reports whether f is a character device, as a terminal is
// (so is /dev/null, where what is written costs nothing).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
