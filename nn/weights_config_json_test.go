package nn_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
)

// TestParseGPTConfigIndentedJSON: a config written as JSON is read
// whatever its layout; one with white space after its opening brace (Go's
// json.MarshalIndent, Python's json.dumps(indent=2), "{ "Vocab": ...}")
// was taken for train-gpt's "{Vocab:...}" text and refused as a bad
// field "\"Vocab\":".
func TestParseGPTConfigIndentedJSON(t *testing.T) {
	want := nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8, Dropout: 0.1}
	b, err := json.MarshalIndent(want, "", "  ")
	require.NoError(t, err)
	for _, s := range []string{string(b), `{ "Vocab": 16, "Context": 8, "Layers": 1, "Heads": 2, "Width": 8, "Dropout": 0.1 }`} {
		got, err := nn.ParseGPTConfig(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
}
