package memviz

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/strata-ml/strata/memory"
)

// roleColors gives each role one colour in both pictures (Tableau's ten,
// which stay apart for most kinds of colour blindness).
var roleColors = [memory.NumRoles]color.RGBA{
	memory.RoleOther:          {0x7f, 0x7f, 0x7f, 0xff},
	memory.RoleParameter:      {0x1f, 0x77, 0xb4, 0xff},
	memory.RoleFrozenWeight:   {0x17, 0xbe, 0xcf, 0xff},
	memory.RoleEmbedding:      {0x94, 0x67, 0xbd, 0xff},
	memory.RoleGradient:       {0xd6, 0x27, 0x28, 0xff},
	memory.RoleOptimizerState: {0x2c, 0xa0, 0x2c, 0xff},
	memory.RoleActivation:     {0xff, 0x7f, 0x0e, 0xff},
	memory.RoleStaging:        {0xbc, 0xbd, 0x22, 0xff},
	memory.RoleWorkspace:      {0x8c, 0x56, 0x4b, 0xff},
}

var (
	freeColor     = color.RGBA{0xd9, 0xd9, 0xd9, 0xff}
	unmappedColor = color.RGBA{0xff, 0xff, 0xff, 0xff}
	pendingColor  = color.RGBA{0x40, 0x40, 0x40, 0xff}
	reservedColor = color.RGBA{0x00, 0x00, 0x00, 0xff}
	markColor     = color.RGBA{0x60, 0x60, 0x60, 0xff}
)

// byteUnit picks MiB or GiB for axes spanning up to max bytes.
func byteUnit(max int64) (float64, string) {
	if max >= 8<<30 {
		return 1 << 30, "GiB"
	}
	return 1 << 20, "MiB"
}

// legendStrip writes a title and a row of role swatches (those in roles,
// then free, pending and unmapped for the segment map, or the reserved
// line for the timeline) along the top of c.
func legendStrip(c draw.Canvas, title string, roles [memory.NumRoles]bool, timeline bool) {
	style := func(size vg.Length) draw.TextStyle {
		return text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
	}
	small := style(10)
	left := c.Min.X + 60
	y := c.Max.Y - 18
	c.FillText(style(14), vg.Point{X: left, Y: y}, title)
	y -= 20
	x := left
	swatch := func(clr color.Color, label string) {
		c.FillPolygon(clr, rect(x, y-1, x+10, y+9))
		c.StrokeLines(draw.LineStyle{Color: color.Gray{Y: 0x80}, Width: 0.4}, rectLine(x, y-1, x+10, y+9))
		c.FillText(small, vg.Point{X: x + 13, Y: y}, label)
		x += 13 + small.Width(label) + 12
	}
	for ro, on := range roles {
		if on {
			swatch(roleColors[ro], memory.Role(ro).String())
		}
	}
	if timeline {
		c.StrokeLine2(draw.LineStyle{Color: reservedColor, Width: 1.5}, x, y+4, x+14, y+4)
		c.FillText(small, vg.Point{X: x + 17, Y: y}, "reserved")
		x += 17 + small.Width("reserved") + 12
		c.StrokeLine2(draw.LineStyle{Color: markColor, Width: 1, Dashes: []vg.Length{3, 3}}, x+5, y-1, x+5, y+9)
		c.FillText(small, vg.Point{X: x + 10, Y: y}, "mark")
		return
	}
	swatch(freeColor, "free")
	swatch(pendingColor, "pending")
	swatch(unmappedColor, "unmapped")
}
