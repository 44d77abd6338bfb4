package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Where stderr is not a terminal, progress is one plain line every
// -progress-every (and one at the last step), with the step, the loss,
// the throughput, the time so far and the time left.
func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := &progress{w: &buf, every: 5 * time.Second, total: 100, first: 20, start: now, last: now, now: func() time.Time { return now }}
	for step := 21; step <= 100; step++ {
		now = now.Add(time.Second) // a step a second
		p.update(step, 1.5, 12345.6)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 16, "one line every 5 of the 80 steps")
	require.Equal(t, "step 25/100  loss 1.5000  12,346 tok/s  elapsed 5s  ETA 1m15s", lines[0])
	require.Equal(t, "step 100/100  loss 1.5000  12,346 tok/s  elapsed 1m20s  ETA 0s", lines[15])
	require.NotContains(t, buf.String(), "\r")

	buf.Reset()
	p = &progress{w: &buf, every: time.Hour, total: 3, start: now, last: now, now: func() time.Time { return now }}
	for step := 1; step <= 3; step++ {
		p.update(step, 2, 10)
	}
	require.Equal(t, "step 3/3  loss 2.0000  10 tok/s  elapsed 0s  ETA 0s\n", buf.String(), "the last step always")

	require.Equal(t, "1,234,567", thousands(1234567.4))
	require.Equal(t, "999", thousands(999))
	require.Equal(t, "-1,000", thousands(-1000))
	o, err := parseFlags([]string{"-quiet"})
	require.NoError(t, err)
	require.Nil(t, newProgress(o, 0).w, "-quiet: nothing")
	require.Equal(t, 5*time.Second, o.progressEvery)
}

// A run whose stderr is a file logs plain progress lines, not a bar
// redrawn with carriage returns: a small log.
func TestProgressInALogFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a subprocess")
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "stderr.log")
	log, err := os.Create(logPath)
	require.NoError(t, err)
	defer log.Close()
	cmd := mainCmd(t, dir, nil, "-device", "cpu", "-steps", "40", "-batch", "8", "-eval-every", "20", "-out", "", "-progress-every", "1ns")
	cmd.Stderr = log
	require.NoError(t, cmd.Run())
	b, err := os.ReadFile(logPath)
	require.NoError(t, err)
	s := string(b)
	require.NotContains(t, s, "\r", "no progress bar")
	require.Contains(t, s, "step 1/40  loss ")
	require.Contains(t, s, "step 40/40  loss ")
	require.Contains(t, s, " tok/s  elapsed ")
	require.Equal(t, 40, strings.Count(s, " ETA "), "a line a step at -progress-every 1ns")
	require.Less(t, len(b), 20000)
}

// A resumed run's bar counts only the steps it trains: the steps of the
// state took no time here, and counted they made the bar's rate and time
// left far too optimistic (1,201 steps in the time of one). The step of
// -steps is in the description.
func TestProgressBarResumed(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{bar: newBar(&buf, 6000, 1200), total: 6000, first: 1200}
	s := p.bar.State()
	require.EqualValues(t, 4800, s.Max, "the steps left")
	require.Zero(t, s.CurrentNum)
	p.update(1201, 1.5, 12345.6)
	s = p.bar.State()
	require.EqualValues(t, 1, s.CurrentNum)
	require.EqualValues(t, 1, s.CurrentBytes, "the rate's count: this run's step")
	require.Positive(t, s.SecondsSince)
	require.InDelta(t, 4799, s.SecondsLeft/s.SecondsSince, 1e-6, "time left: 4,799 steps at the pace of the one trained")
	require.Contains(t, buf.String(), "step 1201/6000")
}

// The bar's clock starts with the bar, made just before the first step:
// started by its first drawing, after that step, it counted the step as
// trained in no time (at 0.6 s a step, 29 s left shown at step 3 of 100
// for 58).
func TestProgressBarClock(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{bar: newBar(&buf, 100, 0), total: 100}
	step := 50 * time.Millisecond
	time.Sleep(step)
	p.update(1, 1.5, 12345.6)
	s := p.bar.State()
	require.GreaterOrEqual(t, s.SecondsSince, step.Seconds(), "the first step's time")
	require.InDelta(t, 99, s.SecondsLeft/s.SecondsSince, 1e-6)
}
