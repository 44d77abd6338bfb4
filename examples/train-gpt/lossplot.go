package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/strata-ml/strata/internal/atomicfile"
)

// lossHistory is what -loss-plot draws: the training loss of every step
// and the held-out loss of every evaluation, from step from on (0 or 1:
// the whole run; a run resumed from a state that holds no loss history
// and without -loss-log knows only the steps after the resume).
type lossHistory struct {
	train, heldOut plotter.XYs
	from           int
	// gap says why the steps before from are missing, when they are: set
	// by loadMetadata (losshistory.go).
	gap string
}

// add records a step's loss, unless it is not finite (a step the fp16
// gradient scaler skipped for a forward pass that overflowed; the plotter
// refuses NaN and infinities), and, when it was evaluated (not NaN), its
// held-out loss.
func (h *lossHistory) add(step int, loss, heldOut float64) {
	if finite(loss) {
		h.train = append(h.train, plotter.XY{X: float64(step), Y: loss})
	}
	if !math.IsNaN(heldOut) {
		h.heldOut = append(h.heldOut, plotter.XY{X: float64(step), Y: heldOut})
	}
}

// lossLine is one line of -loss-log.
type lossLine struct {
	Step    int      `json:"step"`
	Loss    *float64 `json:"loss"` // null: a step the fp16 scaler skipped, its loss not finite
	HeldOut *float64 `json:"held_out_loss,omitempty"`
}

// load reads the steps up to done of a loss log (a resumed run's earlier
// steps), from the first it logged on; a missing file is no error.
func (h *lossHistory) load(path string, done int) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("-loss-log: %w", err)
	}
	h.from = done + 1
	loggedSteps(b, done, func(_ []byte, l lossLine) {
		h.from = min(h.from, l.Step)
		loss, held := math.NaN(), math.NaN()
		if l.Loss != nil {
			loss = *l.Loss
		}
		if l.HeldOut != nil {
			held = *l.HeldOut
		}
		h.add(l.Step, loss, held)
	})
	return nil
}

// loggedSteps calls fn with each line of a loss log (its line ending
// dropped, as bufio.ScanLines drops it) that records a step in 1..done,
// and the line decoded; other lines (a step past done, a line cut short
// by a crash) are skipped. Lines of any length: bufio.Scanner stopped at
// one of 64 KiB.
func loggedSteps(b []byte, done int, fn func(line []byte, l lossLine)) {
	for line := range bytes.Lines(b) {
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		var l lossLine
		if json.Unmarshal(line, &l) != nil || l.Step < 1 || l.Step > done {
			continue
		}
		fn(line, l)
	}
}

// writeLossPlot draws h as a PNG at path (atomically): the training loss
// of each step (thin), its moving average over 2% of the run
// (thick) and the held-out loss at each evaluation (points), against the
// step, on a logarithmic loss axis when every loss is positive.
func writeLossPlot(ctx context.Context, path, title string, h *lossHistory) error {
	if len(h.train) == 0 {
		return fmt.Errorf("-loss-plot %s: no step to plot", path)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.Y.Label.Text = "loss (nats per token)"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	positive := true
	for _, xy := range append(append(plotter.XYs{}, h.train...), h.heldOut...) {
		if !(xy.Y > 0) || math.IsInf(xy.Y, 0) {
			positive = false
		}
	}
	if positive {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	raw, err := plotter.NewLine(h.train)
	if err != nil {
		return fmt.Errorf("-loss-plot: %w", err)
	}
	raw.Color = color.NRGBA{R: 31, G: 119, B: 180, A: 90}
	raw.Width = vg.Points(0.7)
	p.Add(raw)
	p.Legend.Add("training loss", raw)
	if w := len(h.train) / 50; w >= 2 {
		avg, err := plotter.NewLine(movingAverage(h.train, w))
		if err != nil {
			return fmt.Errorf("-loss-plot: %w", err)
		}
		avg.Color = color.RGBA{R: 31, G: 119, B: 180, A: 255}
		avg.Width = vg.Points(1.8)
		p.Add(avg)
		p.Legend.Add(fmt.Sprintf("training loss, mean of %d steps", w), avg)
	}
	if len(h.heldOut) > 0 {
		l, s, err := plotter.NewLinePoints(h.heldOut)
		if err != nil {
			return fmt.Errorf("-loss-plot: %w", err)
		}
		orange := color.RGBA{R: 255, G: 127, B: 14, A: 255}
		l.Color, l.Width = orange, vg.Points(1.5)
		s.Color, s.Shape, s.Radius = orange, draw.CircleGlyph{}, vg.Points(2.5)
		p.Add(l, s)
		p.Legend.Add("held-out loss", l, s)
	}
	wt, err := p.WriterTo(9*vg.Inch, 5*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("-loss-plot: %w", err)
	}
	return atomicfile.Write(ctx, path, func(w io.Writer) error {
		_, err := wt.WriteTo(w)
		return err
	})
}

// logTicks labels a logarithmic loss axis at 1, 1.2, 1.5, 2, 3, 4, 5, 6 and 8
// times the powers of ten in range (gonum's LogTicks labels only the
// powers of ten, and a loss curve often spans none), or at 1, 2 and 5
// times them over a wide range; the others are unlabelled. A range that
// holds fewer than two of them (a short run, or a loss that stalled:
// 5.36 to 5.58) gets gonum's linear ticks, which label it.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, ms := range [][]float64{{1, 1.2, 1.5, 2, 3, 4, 5, 6, 8}, {1, 2, 5}} {
		ticks = ticks[:0]
		labelled := 0
		for d := math.Floor(math.Log10(lo)); d <= math.Ceil(math.Log10(hi)); d++ {
			for _, m := range []float64{1, 1.2, 1.5, 2, 3, 4, 5, 6, 7, 8, 9} {
				v := m * math.Pow(10, d)
				if v < lo || v > hi {
					continue
				}
				t := plot.Tick{Value: v}
				if slices.Contains(ms, m) {
					t.Label = strconv.FormatFloat(v, 'g', 4, 64)
					labelled++
				}
				ticks = append(ticks, t)
			}
		}
		if labelled < 2 {
			return plot.DefaultTicks{}.Ticks(lo, hi)
		}
		if labelled <= 10 {
			break
		}
	}
	return ticks
}

// movingAverage is the mean of the w points ending at each point (of
// fewer at the start).
func movingAverage(xy plotter.XYs, w int) plotter.XYs {
	out := make(plotter.XYs, len(xy))
	var sum float64
	for i := range xy {
		sum += xy[i].Y
		if i >= w {
			sum -= xy[i-w].Y
		}
		out[i] = plotter.XY{X: xy[i].X, Y: sum / float64(min(i+1, w))}
	}
	return out
}

// setLossPlotDefault derives -loss-plot from -out when it is not given:
// gpt.safetensors plots to gpt.loss.png; with no -out, no plot. "off"
// turns it off.
func (o *options) setLossPlotDefault(fs *flag.FlagSet) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "loss-plot" })
	switch {
	case set && o.lossPlot == "off":
		o.lossPlot = ""
	case !set && o.out != "":
		o.lossPlot = strings.TrimSuffix(o.out, ".safetensors") + ".loss.png"
	}
}
