package tensor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// maxSafetensorsHeader is the longest JSON header, in bytes, that
// ReadSafetensors and ReadSafetensorsMetadata take: the safetensors
// format's limit, the one github.com/nlpodyssey/safetensors also applies.
const maxSafetensorsHeader = 100_000_000

// checkHeaderLen returns the error, wrapping ErrArgument, of a header n
// bytes long over maxSafetensorsHeader or longer than the rest of a file
// of size bytes (size -1: unknown, as for a pipe); nil when neither.
func checkHeaderLen(path string, n uint64, size int64) error {
	if n > maxSafetensorsHeader {
		return fmt.Errorf("tensor: safetensors %s: bad header: %d bytes long, over the limit of %d bytes: %w", path, n, maxSafetensorsHeader, ErrArgument)
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
