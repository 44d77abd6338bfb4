package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
)

// TestCheckGPT2LogitsTool runs tools/check_gpt2_logits.py as the README
// and bench/gpu-library.sh do (--generate, weights of train-gpt's byte
// model), with this test binary as generate. Its last command, the timed
// generation, passed -stop-eot=false, which generate refuses for the byte
// tokenizer (it has no end-of-text token): the tool ended in a Python
// traceback and exit 1 after checking every logit. It needs a Python with
// torch and numpy (tools/golden/README.md: the system Python), and skips
// without one.
func TestCheckGPT2LogitsTool(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python and PyTorch")
	}
	py := ""
	for _, c := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(c, "-c", "import torch, numpy").Run() == nil {
			py = c
			break
		}
	}
	if py == "" {
		t.Skip("no python3 with torch and numpy")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "tools", "check_gpt2_logits.py")
	cfg := testCfg
	cfg.Context = 32 // the tool's default prompt is 21 tokens
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	// generate: this binary, running main with the arguments as JSON.
	gen := filepath.Join(t.TempDir(), "generate")
	wrapper := "#!/bin/sh\n" + envMainArgs + "=$(" + py + ` -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")` +
		"\nexport " + envMainArgs + "\nexec " + os.Args[0] + "\n"
	require.NoError(t, os.WriteFile(gen, []byte(wrapper), 0o755))
	cmd := exec.Command(py, script, "--generate", gen, "--weights", w, "--max-new", "4", "--runs", "1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "all logits agree")
}
