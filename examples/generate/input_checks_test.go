package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/nn"
)

// TestCorruptShapeRefusedFromHeader: a file whose header gives the
// position table 100,000,000 rows over the bytes of 16 is refused from
// its header, naming the tensor, before a model is made: generate sized
// the model from the header's shapes and allocated it (47 GiB for a 1.7
// MB file of width 128) before the loader found the offsets bad.
func TestCorruptShapeRefusedFromHeader(t *testing.T) {
	_, w := testWeights(t, testCfg, false, nn.LayoutNanoGPT)
	testfs.EditSafetensorsEntry(t, w, w, "transformer.wpe.weight", func(e map[string]any) { e["shape"] = []int{100_000_000, testCfg.Width} })
	start := time.Now()
	_, _, err := runArgs(t, "-weights", w, "-heads", "2", "-prompt", "1")
	require.ErrorContains(t, err, `not a safetensors file: tensor "transformer.wpe.weight": shape [100000000 16] needs 6400000000 bytes, its data has 1024`)
	require.Less(t, time.Since(start), 10*time.Second)
}

// TestHeadsFromConfigJSON: a bad n_head in config.json beside the file is
// the file's error (status 1), naming config.json, not a bad -heads flag
// (status 2) no one gave; a bad -heads given is still a bad flag.
func TestHeadsFromConfigJSON(t *testing.T) {
	_, bare := testWeights(t, testCfg, false, nn.LayoutHF)
	cfgJSON := filepath.Join(filepath.Dir(bare), "config.json")
	require.NoError(t, os.WriteFile(cfgJSON, []byte(`{"n_head": 3, "n_embd": 16}`), 0o644))
	_, _, err := runArgs(t, "-weights", bare, "-prompt", "1")
	require.Error(t, err)
	var u cli.UsageError
	require.False(t, errors.As(err, &u), "a usage error: %v", err)
	require.Equal(t, 1, cli.ExitCode(err))
	require.NotContains(t, err.Error(), "-heads 3")
	require.ErrorContains(t, err, cfgJSON+": n_head 3 does not fit the tensor shapes of "+bare+": nn: GPT config: width 16 is not divisible by 3 heads")
	_, _, err = runArgs(t, "-weights", bare, "-heads", "5", "-prompt", "1")
	require.True(t, errors.As(err, &u), "%v", err)
	require.Equal(t, 2, cli.ExitCode(err))
	require.ErrorContains(t, err, "-heads 5: nn: GPT config: width 16 is not divisible by 5 heads")
	_, _, err = runArgs(t, "-weights", bare, "-heads", "2", "-prompt", "1", "-max-new", "2")
	require.NoError(t, err, "-heads overrides config.json")
}

// TestAdditionDistinctProblems: -addition N asks N different held-out
// problems, and at most every one once: -digits 1 has 16, and
// -addition 100 asks those 16 (saying so) and scores x/16. It drew with
// replacement, reporting x/100 over the 16 problems asked again and again.
func TestAdditionDistinctProblems(t *testing.T) {
	require.Equal(t, 16, heldOutCount(1))
	next := heldOutProblems(1)
	seen := map[string]bool{}
	for range 16 {
		p, _ := next()
		require.False(t, seen[p], "%s asked twice", p)
		seen[p] = true
	}
	n, distinct, capped := askedProblems(1, 100)
	require.Equal(t, [3]any{16, 16, true}, [3]any{n, distinct, capped})
	n, _, capped = askedProblems(1, 16)
	require.Equal(t, 16, n)
	require.False(t, capped)
	n, _, capped = askedProblems(3, 256)
	require.Equal(t, 256, n)
	require.False(t, capped)
	next = heldOutProblems(2)
	seen = map[string]bool{}
	for range 1006 {
		p, _ := next()
		require.False(t, seen[p], "%s asked twice", p)
		seen[p] = true
	}

	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	out, errs, err := runArgs(t, "-weights", w, "-addition", "100", "-digits", "1", "-quiet")
	require.NoError(t, err)
	require.Contains(t, errs, "generate: -addition 100: 1-digit addition has only 16 held-out problems: asking each once\n")
	require.Regexp(t, `held-out accuracy: \d+/16 = `, out)
	require.Contains(t, out, "(1-digit addition, every held-out problem, answers reversed)")
	require.Contains(t, errs, "for 16 problems")
	out, errs, err = runArgs(t, "-weights", w, "-addition", "5", "-digits", "1", "-quiet")
	require.NoError(t, err)
	require.Regexp(t, `held-out accuracy: \d+/5 = `, out)
	require.False(t, strings.Contains(errs, "asking each once"), errs)
}
