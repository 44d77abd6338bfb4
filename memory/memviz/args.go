package memviz

import (
	"fmt"
	"io"
	"math"

	"gonum.org/v1/plot/vg"

	"github.com/strata-ml/strata/memory"
)

// checkHistory refuses a nil history, which the functions would otherwise
// dereference, and one with an event of a tier or role that does not
// exist (a history made by hand), which they would index with.
func checkHistory(fn string, h *memory.History) error {
	if h == nil {
		return fmt.Errorf("memviz: %s of a nil history (take one with Manager.History or Pool.History): %w", fn, memory.ErrInvalidArgument)
	}
	for i := range h.Events {
		if e := &h.Events[i]; !validEvent(e) {
			return fmt.Errorf("memviz: %s: event %d (seq %d, %s) has tier %d and role %d; there are %d tiers and %d roles: %w",
				fn, i, e.Seq, e.Kind, e.Tier, e.Role, memory.NumTiers, memory.NumRoles, memory.ErrInvalidArgument)
		}
		if i > 0 && h.Events[i].Time < h.Events[i-1].Time {
			return fmt.Errorf("memviz: %s: event %d (seq %d) at %d ns comes before the event ahead of it (%d ns): times must not go back: %w",
				fn, i, h.Events[i].Seq, h.Events[i].Time, h.Events[i-1].Time, memory.ErrInvalidArgument)
		}
	}
	return nil
}

// validEvent reports whether e's tier, and the role of an allocation or
// free, exist.
func validEvent(e *memory.Event) bool {
	if e.Kind == memory.EventMark {
		return true
	}
	return e.Tier < memory.NumTiers && (e.Kind != memory.EventAlloc && e.Kind != memory.EventFree || e.Role < memory.NumRoles)
}

// checkWriter refuses a nil writer.
func checkWriter(fn string, w io.Writer) error {
	if w == nil {
		return fmt.Errorf("memviz: %s to a nil writer: %w", fn, memory.ErrInvalidArgument)
	}
	return nil
}

// maxPixels bounds a picture: 2^28 pixels are 1 GiB of RGBA image, some
// 23 times the defaults' area in each direction.
const maxPixels = 1 << 28

// check refuses options, defaults applied, that no picture of height
// points (the whole picture's) can be drawn with: a size or DPI that is
// not positive, or more than maxPixels.
func (o *PlotOptions) check(fn string, height vg.Length) error {
	bad := func(what string, v any) error {
		return fmt.Errorf("memviz: %s: PlotOptions %s %v: want a positive number: %w", fn, what, v, memory.ErrInvalidArgument)
	}
	switch {
	case o.DPI < 0:
		return bad("DPI", o.DPI)
	case !(o.Width > 0):
		return bad("Width", o.Width)
	case !(o.Height > 0):
		return bad("Height", o.Height)
	}
	w := math.Ceil(float64(o.Width) / float64(vg.Inch) * float64(o.DPI))
	h := math.Ceil(float64(height) / float64(vg.Inch) * float64(o.DPI))
	if !(w*h <= maxPixels) {
		return fmt.Errorf("memviz: %s: PlotOptions Width %v, Height %v and DPI %d make a picture of %.0f by %.0f pixels, more than %d: %w",
			fn, o.Width, o.Height, o.DPI, w, h, maxPixels, memory.ErrInvalidArgument)
	}
	return nil
}
