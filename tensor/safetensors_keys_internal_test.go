package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// countKeys counts the strings a ':' follows, and no ':' or '"' inside a
// string: escaped quotes, a string ending in an escaped backslash, and
// whitespace between a key and its ':'.
func TestCountKeys(t *testing.T) {
	for hdr, want := range map[string]int{
		`{}`:                             0,
		`{"a":{}}`:                       1,
		`{"a" : "b:", "c"	:"d"}`:         2,
		"{\"a\"\r\n:\n\"b\"}":            1,
		`{"a":"\":\"x\":","b":1}`:        2,
		`{"a":"v\\","b":"w\\\\","c":[]}`: 3,
		`{"\"a\"":"x","\\":"y"}`:         2,
		`["a", "b", {"c": ["d:"]}]`:      1,
		`{"a":{"b":{"c":"d"}}}    `:      3,
	} {
		require.Equal(t, want, countKeys([]byte(hdr)), hdr)
	}
}
