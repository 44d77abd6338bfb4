package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/strata-ml/strata/internal/cli"
)

// progress shows how training goes: a progress bar on a terminal; where
// stderr is not a terminal (a log file, a pipe, a batch job), whose lines a
// bar redrawn five times a second would flood (230 KB for one run), one
// plain line every -progress-every instead:
//
//	step 1200/6000  loss 0.4213  41,830 tok/s  elapsed 1m2s  ETA 4m8s
type progress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer // plain lines; nil: none
	every time.Duration
	total int
	first int // the step the run started after (a resumed run's)
	start time.Time
	last  time.Time // when the last plain line was written
	now   func() time.Time
}

// newProgress makes what -quiet, -progress-every and stderr call for.
func newProgress(o *options, done int) *progress {
	p := &progress{total: o.steps, first: done, every: o.progressEvery, now: time.Now}
	p.start = p.now()
	p.last = p.start
	switch {
	case o.quiet, done >= o.steps: // -quiet, or a complete state: nothing to train
	case cli.IsTerminal(os.Stderr):
		p.bar = newBar(os.Stderr, o.steps, done)
	case o.progressEvery > 0:
		p.w = os.Stderr
	}
	return p
}

// newBar is the progress bar, drawn on w, of a run of steps steps whose
// first done are done (a resumed run's). It counts the steps left only:
// the library has no starting value kept out of its rate, and the done
// steps, set on it, would count as trained in no time (a rate and time
// left far too optimistic until its rolling average forgets them).
// update describes the step of -steps. Its clock starts now, before the
// first step: started by its first drawing, after that step, it would
// count the step as trained in no time.
func newBar(w io.Writer, steps, done int) *progressbar.ProgressBar {
	bar := progressbar.NewOptions(steps-done, progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30), progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
	bar.StartWithoutRender()
	return bar
}

// update reports step (1-based) done, with the smoothed loss and the
// throughput so far.
func (p *progress) update(step int, loss, tokS float64) {
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("step %d/%d | loss %.4f | %.0f tok/s", step, p.total, loss, tokS))
		p.bar.Add(1)
		return
	}
	if p.w == nil {
		return
	}
	now := p.now()
	if now.Sub(p.last) < p.every && step < p.total {
		return
	}
	p.last = now
	el := now.Sub(p.start)
	eta := "-"
	if n := step - p.first; n > 0 {
		eta = roundDuration(time.Duration(float64(el) / float64(n) * float64(p.total-step))).String()
	}
	fmt.Fprintf(p.w, "step %d/%d  loss %.4f  %s tok/s  elapsed %v  ETA %s\n", step, p.total, loss, thousands(tokS), roundDuration(el), eta)
}

// clear makes room for a line of text (the bar redraws itself after).
func (p *progress) clear() {
	if p.bar != nil {
		p.bar.Clear()
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

// roundDuration rounds to seconds (to tenths under ten seconds).
func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// thousands formats x rounded, with commas: 41830.2 -> "41,830".
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
