package tensor

import "fmt"

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
