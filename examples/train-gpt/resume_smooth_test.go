package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestResumeRefusesNonFiniteSmoothedLoss: a training state's smoothed
// loss is a mean of finite losses (a step with another is stopped); one
// that is NaN or infinite (a corrupt file) was taken, and every line the
// resumed run printed said "loss NaN" as if training had diverged. A
// NaN step loss of an evaluation due (train.eval_due_loss) was taken for
// none, and the evaluation was skipped. They are refused, naming the
// key, as the state's other bad entries are, with status 2 (bad input;
// they ended with status 1).
func TestResumeRefusesNonFiniteSmoothedLoss(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"x", 4, []string{"-batch", "4"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopAt = 2
	require.Error(t, run(o))
	state := filepath.Join(dir, "state.safetensors")
	good := readFile(t, state)
	for _, key := range []string{keySmooth, keyEvalDue} {
		for _, v := range []string{"NaN", "+Inf", "-Inf"} {
			require.NoError(t, os.WriteFile(state, good, 0o644))
			rewriteMetadata(t, state, func(meta map[string]string) { meta[key] = v })
			o, err := parseFlags(append(c.args(t.TempDir(), "cpu"), "-resume", state))
			require.NoError(t, err)
			err = run(o)
			require.ErrorContains(t, err, "not a train-gpt training state file (metadata "+key+" = \""+v+"\")")
			require.Equal(t, 2, cli.ExitCode(err), "%v", err)
		}
	}
}
