package memviz

import (
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/strata-ml/strata/memory"
)

// WriteSnapshotJSON writes s as indented JSON.
func WriteSnapshotJSON(w io.Writer, s memory.Snapshot) error {
	if err := checkWriter("WriteSnapshotJSON", w); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(s)
}

// maxMapBytes bounds the bytes a segment map lays out, far beyond any
// machine's memory: a snapshot made by hand or read from a damaged file
// whose block sizes summed past int64 wrapped to a small total, and the
// map then drew a block of 2^63 bytes a row of 2 MiB at a time, for
// ever; a negative size drew blocks backwards over their neighbours.
const maxMapBytes = 1 << 62

// mapped returns a segment's blocks without the unmapped tail of an
// expandable segment (its reserved but never used address space), and
// the bytes they span.
func mapped(s *memory.SegmentInfo) ([]memory.BlockInfo, int64) {
	bs := s.Blocks
	for len(bs) > 0 && bs[len(bs)-1].Unmapped {
		bs = bs[:len(bs)-1]
	}
	var n int64
	for _, b := range bs {
		n += b.Size
	}
	return bs, n
}

// WriteSegmentMapPNG draws every segment of s: each tier's segments (small
// pool first, then by address) laid end to end along rows of equal bytes,
// a thick black line where a segment starts, each live block in its
// role's colour, free blocks grey, pending ones dark grey and unmapped
// pages of expandable segments white.
func WriteSegmentMapPNG(w io.Writer, s memory.Snapshot, o PlotOptions) error {
	if err := checkWriter("WriteSegmentMapPNG", w); err != nil {
		return err
	}
	o.defaults(11*vg.Inch, 0)
	type section struct {
		ts    *memory.TierSnapshot
		segs  []memory.SegmentInfo
		bytes int64
	}
	var secs []section
	var total, largest int64
	for i := range s.Tiers {
		ts := &s.Tiers[i]
		if len(ts.Segments) == 0 {
			continue
		}
		sec := section{ts: ts, segs: slices.Clone(ts.Segments)}
		slices.SortFunc(sec.segs, func(a, b memory.SegmentInfo) int {
			if a.Small != b.Small {
				if a.Small {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.Addr, b.Addr)
		})
		for j := range sec.segs {
			bs, n := mapped(&sec.segs[j])
			spanned := total + sec.bytes
			for _, b := range bs {
				if b.Live && b.Role >= memory.NumRoles {
					return fmt.Errorf("memviz: WriteSegmentMapPNG: the block at %#x has role %d; there are %d roles: %w",
						b.Addr, b.Role, memory.NumRoles, memory.ErrInvalidArgument)
				}
				if b.Size < 0 || b.Size > maxMapBytes-spanned {
					return fmt.Errorf("memviz: WriteSegmentMapPNG: the block at %#x has %d bytes, after %d of the map; blocks must have 0 bytes or more, %d in all at most: %w",
						b.Addr, b.Size, spanned, int64(maxMapBytes), memory.ErrInvalidArgument)
				}
				spanned += b.Size
			}
			sec.bytes += n
			largest = max(largest, n)
		}
		total += sec.bytes
		secs = append(secs, sec)
	}
	if total == 0 {
		return fmt.Errorf("memviz: the snapshot holds no segment: nothing to draw")
	}
	// Rows of rowBytes: about 60 rows in all, a multiple of 2 MiB.
	const wantRows = 60
	rowBytes := max((total+wantRows-1)/wantRows, 2<<20)
	rowBytes = (rowBytes + 2<<20 - 1) &^ (2<<20 - 1)
	rows := 0
	for _, sec := range secs {
		rows += int((sec.bytes + rowBytes - 1) / rowBytes)
	}
	const (
		rowH    = vg.Length(11)
		rowGap  = vg.Length(3)
		headH   = vg.Length(22)
		titleH  = vg.Length(44)
		bottomH = vg.Length(14)
		left    = vg.Length(70)
		right   = vg.Length(16)
	)
	if o.Height == 0 {
		o.Height = titleH + bottomH + vg.Length(len(secs))*headH + vg.Length(rows)*(rowH+rowGap)
	}
	if err := o.check("WriteSegmentMapPNG", o.Height); err != nil {
		return err
	}
	img := vgimg.NewWith(vgimg.UseWH(o.Width, o.Height), vgimg.UseDPI(o.DPI))
	c := draw.New(img)
	c.FillPolygon(color.White, []vg.Point{{X: 0, Y: 0}, {X: o.Width, Y: 0}, {X: o.Width, Y: o.Height}, {X: 0, Y: o.Height}})
	style := func(size vg.Length) draw.TextStyle {
		return text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
	}
	small, body := style(9), style(11)
	title := o.Title
	if title == "" {
		title = "strata memory: segments and blocks"
	}
	var all [memory.NumRoles]bool
	for i := range all {
		all[i] = true
	}
	legendStrip(c, title, all, false)
	y := o.Height - 38
	y -= 8
	width := o.Width - left - right
	xOf := func(off int64) vg.Length { return left + width*vg.Length(float64(off)/float64(rowBytes)) }
	for _, sec := range secs {
		u := sec.ts.Usage
		y -= headH
		c.FillText(body, vg.Point{X: 4, Y: y + 6}, fmt.Sprintf("%s (%s): %d segments spanning %s, %s reserved, %s allocated, %s requested; row = %s",
			sec.ts.Tier, sec.ts.Backend, len(sec.segs), memory.FormatBytes(sec.bytes), memory.FormatBytes(u.Reserved.Current),
			memory.FormatBytes(u.Allocated.Current), memory.FormatBytes(u.Requested.Current), memory.FormatBytes(rowBytes)))
		var pos int64 // bytes laid out in this section so far
		rowTop := func(p int64) vg.Length { return y - vg.Length(p/rowBytes)*(rowH+rowGap) }
		nrows := (sec.bytes + rowBytes - 1) / rowBytes
		for r := range nrows {
			ry := y - vg.Length(r)*(rowH+rowGap)
			lbl := memory.FormatBytes(r * rowBytes)
			c.FillText(small, vg.Point{X: left - 4 - small.Width(lbl), Y: ry - rowH + 2}, lbl)
		}
		// fill draws [pos, pos+n) in clr, across rows.
		fill := func(pos, n int64, clr color.Color) {
			for n > 0 {
				off := pos % rowBytes
				k := min(n, rowBytes-off)
				top := rowTop(pos)
				c.FillPolygon(clr, rect(xOf(off), top-rowH, xOf(off+k), top))
				pos += k
				n -= k
			}
		}
		for si := range sec.segs {
			bs, _ := mapped(&sec.segs[si])
			start := pos
			for _, b := range bs {
				clr := color.Color(freeColor)
				switch {
				case b.Live:
					clr = roleColors[b.Role]
				case b.Pending:
					clr = pendingColor
				case b.Unmapped:
					clr = unmappedColor
				}
				fill(pos, b.Size, clr)
				if b.Live && pos != start { // a hairline between neighbours
					top := rowTop(pos)
					c.StrokeLine2(draw.LineStyle{Color: color.White, Width: 0.3}, xOf(pos%rowBytes), top-rowH, xOf(pos%rowBytes), top)
				}
				pos += b.Size
			}
			top := rowTop(start)
			c.StrokeLine2(draw.LineStyle{Color: color.Black, Width: 1.4}, xOf(start%rowBytes), top-rowH-1, xOf(start%rowBytes), top+1)
		}
		y -= vg.Length(nrows)*(rowH+rowGap) - rowGap
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

func rect(x0, y0, x1, y1 vg.Length) []vg.Point {
	return []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
}

func rectLine(x0, y0, x1, y1 vg.Length) []vg.Point {
	return append(rect(x0, y0, x1, y1), vg.Point{X: x0, Y: y0})
}
