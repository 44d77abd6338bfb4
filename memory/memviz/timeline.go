package memviz

import (
	"errors"
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/strata-ml/strata/memory"
)

// PlotOptions sizes a picture.
type PlotOptions struct {
	// Title heads the picture ("" for a default).
	Title string
	// Width and Height in points (1/72 inch); 0 for the defaults. For the
	// timeline, Height is per tier.
	Width, Height vg.Length
	// DPI of the PNG; 0 means 96.
	DPI int
	// MaxPoints bounds the samples per tier of the timeline: when the
	// history has more events, each of MaxPoints time buckets keeps its
	// moment of most allocated bytes (so no peak is lost) with its most
	// reserved bytes, and each tier ends on its state after its last
	// event; 0 means 2000.
	MaxPoints int
	// ByEvent puts the timeline's events at equal steps (x is the event's
	// number in the window) instead of at their times, as memory_viz can:
	// bursts of allocations spread out, idle stretches vanish.
	ByEvent bool
}

func (o *PlotOptions) defaults(w, h vg.Length) {
	if o.Width == 0 {
		o.Width = w
	}
	if o.Height == 0 {
		o.Height = h
	}
	if o.DPI == 0 {
		o.DPI = 96
	}
	if o.MaxPoints <= 0 {
		o.MaxPoints = 2000
	}
}

// sample is one tier's bytes at one time.
type sample struct {
	t         float64 // ms since the window's first event
	allocated [memory.NumRoles]int64
	reserved  int64
}

// tierSamples follows each tier's bytes through h, one sample per event
// that moves them, bucketed down to at most max samples per tier (one
// more for a tier whose last bucket's peak is not its final state: the
// line ends on the final state, as memory_viz's does).
func tierSamples(h *memory.History, maxPoints int, byEvent bool) (out [memory.NumTiers][]sample, marks []float64) {
	r := newReplayer(h)
	moved := movedReleases(h.Events)
	var t0, t1 int64
	if len(h.Events) > 0 {
		t0, t1 = h.Events[0].Time, h.Events[len(h.Events)-1].Time
	}
	ms := func(ns int64) float64 { return float64(ns-t0) / 1e6 }

	for t := range memory.NumTiers {
		out[t] = append(out[t], sample{t: 0, allocated: r.tiers[t].allocated, reserved: r.tiers[t].reserved})
	}
	span := float64(t1-t0) / 1e6
	if byEvent {
		span = float64(max(len(h.Events)-1, 0))
	}
	var final [memory.NumTiers]sample // each tier's state after its last event
	for i := range h.Events {
		e := &h.Events[i]
		at := ms(e.Time)
		if byEvent {
			at = float64(i)
		}
		if e.Kind == memory.EventMark {
			marks = append(marks, at)
			continue
		}
		r.apply(e)
		if moved[i] {
			continue
		}
		s := sample{t: at, allocated: r.tiers[e.Tier].allocated, reserved: r.tiers[e.Tier].reserved}
		final[e.Tier] = s
		ss := out[e.Tier]
		// Bucket: a sample in the same bucket as the last replaces it when
		// it holds more bytes (the bucket keeps its peak). The reserved
		// bytes are the bucket's most, of whichever moment: a segment
		// reserved and released within the bucket while fewer bytes were
		// allocated would otherwise vanish from the line, and the bucket
		// could show fewer bytes reserved than allocated.
		if span > 0 && len(ss) > 1 {
			last := &ss[len(ss)-1]
			if int(last.t/span*float64(maxPoints)) == int(s.t/span*float64(maxPoints)) {
				if sum(s.allocated) >= sum(last.allocated) {
					s.reserved = max(s.reserved, last.reserved)
					*last = s
				} else {
					last.reserved = max(last.reserved, s.reserved)
				}
				continue
			}
		}
		out[e.Tier] = append(ss, s)
	}
	for t := range out {
		// A tier's last bucket kept its peaks, which a later event of the
		// bucket may have freed or released: the line goes down to the
		// final state at that event's time.
		if ss := out[t]; len(ss) > 1 && (ss[len(ss)-1].allocated != final[t].allocated || ss[len(ss)-1].reserved != final[t].reserved) {
			out[t] = append(ss, final[t])
		}
		if ss := out[t]; len(ss) > 0 && ss[len(ss)-1].t < span {
			last := ss[len(ss)-1]
			last.t = span
			out[t] = append(ss, last)
		}
	}
	return out, marks
}

func sum(a [memory.NumRoles]int64) int64 {
	var s int64
	for _, b := range a {
		s += b
	}
	return s
}

// WriteTimelinePNG draws h as a PNG: for every tier it touches, the bytes
// of live blocks stacked by role over time (milliseconds from the first
// event) with the tier's reserved bytes as a black line and marks as
// dashed vertical lines, like memory_viz's active-memory timeline.
func WriteTimelinePNG(w io.Writer, h *memory.History, o PlotOptions) error {
	if err := errors.Join(checkWriter("WriteTimelinePNG", w), checkHistory("WriteTimelinePNG", h)); err != nil {
		return err
	}
	o.defaults(11*vg.Inch, 3.6*vg.Inch)
	tiers := usedTiers(h)
	if len(tiers) == 0 {
		return fmt.Errorf("memviz: the history is empty: nothing to plot")
	}
	const head = vg.Length(46) // title and legend
	if err := o.check("WriteTimelinePNG", head+o.Height*vg.Length(len(tiers))); err != nil {
		return err
	}
	samples, marks := tierSamples(h, o.MaxPoints, o.ByEvent)
	var labels []string
	for i := range h.Events {
		if e := &h.Events[i]; e.Kind == memory.EventMark {
			labels = append(labels, e.Op)
		}
	}
	xLabel := "time, ms"
	if o.ByEvent {
		xLabel = "event"
	}
	var roles [memory.NumRoles]bool
	plots := make([][]*plot.Plot, len(tiers))
	for i, t := range tiers {
		p, err := tierTimeline(samples[t], marks, labels, t, h.Backends[t], xLabel, &roles)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.NewWith(vgimg.UseWH(o.Width, head+o.Height*vg.Length(len(tiers))), vgimg.UseDPI(o.DPI))
	dc := draw.New(img)
	title := o.Title
	if title == "" {
		title = "strata memory timeline"
	}
	legendStrip(dc, title, roles, true)
	dc.Max.Y -= head
	canvases := plot.Align(plots, draw.Tiles{Rows: len(tiers), Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// tierTimeline is one tier's panel; it marks in roles those it shows.
func tierTimeline(ss []sample, marks []float64, labels []string, t memory.Tier, backend, xLabel string, roles *[memory.NumRoles]bool) (*plot.Plot, error) {
	p := plot.New()
	var maxBytes int64
	for _, s := range ss {
		maxBytes = max(maxBytes, s.reserved, sum(s.allocated))
	}
	div, unit := byteUnit(maxBytes)
	label := t.String()
	if backend != "" && backend != t.String() {
		label += ": " + backend
	}
	p.Y.Label.Text = label + ", " + unit
	p.X.Label.Text = xLabel
	p.Add(plotter.NewGrid())
	// Stacked bands, bottom up in role order, as step functions.
	lower := make([]float64, len(ss))
	for ro := range memory.NumRoles {
		var any bool
		for _, s := range ss {
			any = any || s.allocated[ro] != 0
		}
		if !any {
			continue
		}
		upper := make([]float64, len(ss))
		for i, s := range ss {
			upper[i] = lower[i] + float64(s.allocated[ro])/div
		}
		var pts plotter.XYs
		for i, s := range ss { // upper edge, left to right
			if i > 0 {
				pts = append(pts, plotter.XY{X: s.t, Y: upper[i-1]})
			}
			pts = append(pts, plotter.XY{X: s.t, Y: upper[i]})
		}
		for i := len(ss) - 1; i >= 0; i-- { // lower edge, right to left
			pts = append(pts, plotter.XY{X: ss[i].t, Y: lower[i]})
			if i > 0 {
				pts = append(pts, plotter.XY{X: ss[i].t, Y: lower[i-1]})
			}
		}
		poly, err := plotter.NewPolygon(pts)
		if err != nil {
			return nil, err
		}
		poly.Color = roleColors[ro]
		poly.LineStyle.Width = 0
		p.Add(poly)
		roles[ro] = true
		lower = upper
	}
	var res plotter.XYs
	for i, s := range ss {
		if i > 0 {
			res = append(res, plotter.XY{X: s.t, Y: float64(ss[i-1].reserved) / div})
		}
		res = append(res, plotter.XY{X: s.t, Y: float64(s.reserved) / div})
	}
	line, err := plotter.NewLine(res)
	if err != nil {
		return nil, err
	}
	line.Color = reservedColor
	line.Width = vg.Points(1.2)
	p.Add(line)
	top := float64(maxBytes) / div * 1.12
	if top == 0 {
		top = 1
	}
	for i, x := range marks {
		ml, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
		if err != nil {
			return nil, err
		}
		ml.Color = markColor
		ml.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(ml)
		// Labels alternate between two heights, so that close marks stay
		// readable.
		y := top * (0.995 - 0.045*float64(i%2))
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: y}}, Labels: []string{" " + labels[i]}})
		if err != nil {
			return nil, err
		}
		lb.TextStyle[0].Color = markColor
		lb.TextStyle[0].YAlign = draw.YTop
		p.Add(lb)
	}
	p.Y.Min, p.Y.Max = 0, top
	return p, nil
}
