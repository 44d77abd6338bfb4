package tensor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	st "github.com/nlpodyssey/safetensors"
)

// MaxSafetensorsHeader is the longest JSON header, in bytes, that
// ReadSafetensors and ReadSafetensorsMetadata take: the safetensors
// format's limit, the one github.com/nlpodyssey/safetensors also applies.
// Readers of such files outside this package (nn's) apply it too, so that
// a file one reader takes the others take.
const MaxSafetensorsHeader = 100_000_000

// checkHeaderLen returns the error, wrapping ErrArgument, of a header n
// bytes long over MaxSafetensorsHeader or longer than the rest of a file
// of size bytes (size -1: unknown, as for a pipe); nil when neither.
func checkHeaderLen(path string, n uint64, size int64) error {
	if n > MaxSafetensorsHeader {
		return fmt.Errorf("tensor: safetensors %s: bad header: %d bytes long, over the limit of %d bytes: %w", path, n, MaxSafetensorsHeader, ErrArgument)
	}
	if size >= 8 && n > uint64(size)-8 {
		return fmt.Errorf("tensor: safetensors %s: bad header: %d bytes long in a file of %d: %w", path, n, size, ErrArgument)
	}
	return nil
}

// CheckSafetensorsHeader returns the error ReadSafetensors gives a
// safetensors header (the JSON after the file's 8-byte length) that gives
// a key twice in one object, wrapping ErrArgument and naming path and the
// key, or nil: for readers of such files outside this package (nn's
// weights loaders), which encoding/json would let keep the last.
func CheckSafetensorsHeader(path string, header []byte) error {
	return checkHeaderKeys(path, header)
}

// CheckParsedSafetensorsHeader returns the error ReadSafetensors gives a
// header that github.com/nlpodyssey/safetensors parsed into md (its
// ReadMetadata), or nil: bytes that are not UTF-8 (encoding/json would
// read them as U+FFFD, so two names could become one) or a key given twice
// in one object. It costs a pass over the bytes, not a second parse: for
// readers outside this package that parse the header once (nn's weights
// loader).
func CheckParsedSafetensorsHeader(path string, header []byte, md st.Metadata) error {
	if !utf8.Valid(header) {
		return fmt.Errorf("tensor: safetensors %s: bad header: not valid UTF-8: %w", path, ErrArgument)
	}
	return checkParsedHeaderKeys(path, header, len(md.Tensors()), md.Metadata())
}

// checkParsedHeaderKeys returns checkHeaderKeys(path, hdr) for a header
// that github.com/nlpodyssey/safetensors has parsed, finding tensors
// tensor entries and the metadata meta (nil when there is no
// "__metadata__" entry), without checkHeaderKeys' parse where it can.
//
// The library has checked the header's shape: it is valid JSON (its
// json.Unmarshal checks the whole header first), and its only objects are
// the top level (one key a tensor and "__metadata__"), the metadata (whose
// values are strings) and the tensors' entries, of exactly three distinct
// keys each (whose values are a string and arrays of numbers). The maps
// it kept hold each object's distinct keys, so the header has a key twice
// in one object if and only if it has more keys in all than those maps
// hold: counting the keys is a pass over the bytes, no parse. When the
// count is over, checkHeaderKeys finds the key, for the same error.
func checkParsedHeaderKeys(path string, hdr []byte, tensors int, meta map[string]string) error {
	distinct := tensors + 3*tensors + len(meta)
	if meta != nil {
		distinct++ // "__metadata__"
	}
	if countKeys(hdr) == distinct {
		return nil
	}
	return checkHeaderKeys(path, hdr)
}

// countKeys returns the number of object keys in hdr, valid JSON: the
// strings that a ':' follows (after any whitespace). Each string is
// skipped to its closing quote, over escaped characters (a '\' and the
// byte after it), so a ':' or '"' inside one is not counted.
func countKeys(hdr []byte) int {
	keys := 0
	for i := 0; i < len(hdr); i++ {
		if hdr[i] != '"' {
			continue
		}
		for i++; i < len(hdr) && hdr[i] != '"'; i++ {
			if hdr[i] == '\\' {
				i++
			}
		}
		j := i + 1
		for j < len(hdr) && (hdr[j] == ' ' || hdr[j] == '\t' || hdr[j] == '\n' || hdr[j] == '\r') {
			j++
		}
		if j < len(hdr) && hdr[j] == ':' {
			keys++
		}
	}
	return keys
}

// checkHeaderKeys returns the error, wrapping ErrArgument, of a header
// (JSON already parsed once, by a reader that keeps the last of equal
// keys) in which one object has a key twice: a tensor name, the metadata
// entry, a metadata key or a key of one tensor's entry; nil when no
// object has. Keys compare as their decoded strings ("a" and "\u0061" are
// one key). One pass of the decoder's tokens over the header.
func checkHeaderKeys(path string, hdr []byte) error {
	d := json.NewDecoder(bytes.NewReader(hdr))
	d.UseNumber() // numbers are skipped: no float conversion
	dup, err := scanKeys(d, nil)
	if err != nil {
		return fmt.Errorf("tensor: safetensors %s: bad header: %w: %w", path, err, ErrArgument)
	}
	if dup == nil {
		return nil
	}
	key := dup[len(dup)-1]
	var what string
	switch {
	case len(dup) == 1 && key == stMetadataKey:
		what = fmt.Sprintf("duplicate key %q", key)
	case len(dup) == 1:
		what = fmt.Sprintf("duplicate tensor name %q", key)
	case dup[0] == stMetadataKey:
		what = fmt.Sprintf("duplicate key %q in %s", key, stMetadataKey)
	default:
		what = fmt.Sprintf("duplicate key %q in tensor %q", key, dup[0])
	}
	return fmt.Errorf("tensor: safetensors %s: bad header: %s: %w", path, what, ErrArgument)
}

// scanKeys reads one JSON value from d and checks every object in it for
// a key given twice. The first one found is returned as the keys leading
// to it from the header's top level: outer, the keys of the objects that
// hold the value, then the duplicated key; nil when there is none.
func scanKeys(d *json.Decoder, outer []string) ([]string, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		for d.More() {
			if dup, err := scanKeys(d, outer); dup != nil || err != nil {
				return dup, err
			}
		}
	case json.Delim('{'):
		// The keys seen so far: a slice scanned in turn while it is short
		// (a tensor's entry has three), a set once it is not.
		var few [4]string
		seen := few[:0]
		var set map[string]struct{}
		for d.More() {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			key, ok := tok.(string)
			if !ok {
				return nil, fmt.Errorf("object key %v is not a string", tok)
			}
			var again bool
			if set != nil {
				_, again = set[key]
				set[key] = struct{}{}
			} else {
				again = slices.Contains(seen, key)
				if seen = append(seen, key); len(seen) > 16 {
					set = make(map[string]struct{}, 64)
					for _, k := range seen {
						set[k] = struct{}{}
					}
				}
			}
			if again {
				return append(outer, key), nil
			}
			if dup, err := scanKeys(d, append(outer, key)); dup != nil || err != nil {
				return dup, err
			}
		}
	default:
		return nil, nil // a string, number, bool or null
	}
	_, err = d.Token() // the closing ']' or '}'
	return nil, err
}
