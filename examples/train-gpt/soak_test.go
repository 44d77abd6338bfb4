package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// The soak test: many training steps with the bytes in use checked after
// every one. It runs only when STRATA_SOAK gives the number of steps:
//
//	STRATA_SOAK=20000 go test ./examples/train-gpt -run TestSoak -v -timeout 2h
//
// trains the default job (the tiny preset on the addition task, 128 rows a
// step) on the CPU. STRATA_SOAK_DEVICE=cuda, STRATA_SOAK_CONFIG=gpt2 (random
// tokens, the config's batch and context; STRATA_SOAK_BATCH overrides the
// batch) and STRATA_SOAK_PRECISION=bf16 choose other runs; STRATA_SOAK_OUT
// names a file for the result's JSON line.
type soakResult struct {
	Config, Device, Precision string
	Steps, Batch, SeqLen      int
	Seconds, TokS             float64
	// InUse is the bytes in use (the manager's) after the first step; it
	// was the same after every step (the test fails otherwise).
	InUse, CtxBytes int64
	// Reserved after the first step, at the end, and its most.
	ReservedFirst, ReservedEnd, ReservedMax int64
	// LastGrowth is the last step after which reserved bytes grew.
	LastGrowth int
	// RSS of the process (CPU runs) after the first step and at the end.
	RSSFirst, RSSEnd    int64
	LossFirst, LossLast float64
	Leaked              int64 // tensors the garbage collector found unreleased
}

func TestSoak(t *testing.T) {
	steps, _ := strconv.Atoi(os.Getenv("STRATA_SOAK"))
	if steps <= 0 {
		t.Skip("set STRATA_SOAK to the number of steps")
	}
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	dev, err := tensor.ParseDevice(env("STRATA_SOAK_DEVICE", "cpu"))
	require.NoError(t, err)
	config := env("STRATA_SOAK_CONFIG", "tiny")
	cfg, err := nn.LookupGPTConfig(config)
	require.NoError(t, err)
	var data dataset = randomData{vocab: cfg.Vocab}
	T, B := cfg.Context, cfg.Batch
	if config == "tiny" {
		task, err := newAdditionTask(3)
		require.NoError(t, err)
		data, B = task, 128
		T, err = task.seqLen(cfg.Context)
		require.NoError(t, err)
	}
	if b := os.Getenv("STRATA_SOAK_BATCH"); b != "" {
		B, err = strconv.Atoi(b)
		require.NoError(t, err)
	}
	o, err := parseFlags([]string{"-config", config, "-batch", fmt.Sprint(B), "-steps", fmt.Sprint(steps), "-precision", env("STRATA_SOAK_PRECISION", "fp32")})
	require.NoError(t, err)
	tr, err := newTrainer(o, cfg, dev, T)
	require.NoError(t, err)
	defer tr.release()
	rng := rand.New(rand.NewPCG(1, 0xDA7A))
	m := dev.Memory()
	r := soakResult{Config: config, Device: dev.String(), Precision: o.precision, Steps: steps, Batch: B, SeqLen: T}
	leaked := tensor.LeakedTensors()
	start := time.Now()
	for it := range steps {
		data.batch(rng, tr.xs, tr.ys, tr.B, tr.T)
		loss, err := tr.step(it)
		require.NoError(t, err, "step %d", it+1)
		reserved := m.Stats().Total.Reserved.Current
		if it == 0 {
			require.NoError(t, dev.Synchronize())
			r.InUse, r.CtxBytes, r.LossFirst = m.InUse(), tr.c.BytesInUse(), loss
			r.ReservedFirst, r.ReservedMax, r.RSSFirst = reserved, reserved, rss()
			continue
		}
		if in := m.InUse(); in != r.InUse || tr.c.BytesInUse() != r.CtxBytes {
			t.Fatalf("step %d: %d bytes in use (context %d), %d after step 1 (context %d)", it+1, in, tr.c.BytesInUse(), r.InUse, r.CtxBytes)
		}
		if reserved > r.ReservedMax {
			r.ReservedMax, r.LastGrowth = reserved, it+1
		}
		r.LossLast = loss
		if (it+1)%1000 == 0 {
			t.Logf("step %d: loss %.4f, %s in use, %s reserved, RSS %s", it+1, loss, memory.FormatBytes(r.InUse), memory.FormatBytes(reserved), memory.FormatBytes(rss()))
		}
	}
	require.NoError(t, dev.Synchronize())
	r.Seconds = time.Since(start).Seconds()
	r.TokS = float64(steps*B*T) / r.Seconds
	r.ReservedEnd, r.RSSEnd = m.Stats().Total.Reserved.Current, rss()
	r.Leaked = tensor.LeakedTensors() - leaked
	line, err := json.Marshal(r)
	require.NoError(t, err)
	t.Logf("%s", line)
	if out := os.Getenv("STRATA_SOAK_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		fmt.Fprintf(f, "%s\n", line)
		require.NoError(t, f.Close())
	}
	require.Zero(t, r.Leaked, "tensors left to the garbage collector")
}

// rss is the process's resident set in bytes (Linux; 0 elsewhere).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return pages * int64(os.Getpagesize())
}
