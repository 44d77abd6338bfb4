package main

import (
	"context"
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/strata-ml/strata/internal/atomicfile"
)

// plotRows draws two bar charts side by side: peak device memory (MiB)
// and tokens/s per strategy, and writes them to path (savePNG; ctx
// cancelled abandons the write).
func plotRows(ctx context.Context, rows []result, path, title string) error {
	names := make([]string, len(rows))
	mem, speed := make(plotter.Values, len(rows)), make(plotter.Values, len(rows))
	for i, r := range rows {
		names[i] = r.Strategy
		mem[i] = r.PeakMiB
		speed[i] = r.TokS
	}
	bars := func(label string, v plotter.Values) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = label
		p.Y.Label.Text = label
		b, err := plotter.NewBarChart(v, vg.Points(28))
		if err != nil {
			return nil, err
		}
		p.Add(b)
		p.NominalX(names...)
		p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5 // whole bars at both ends
		p.Y.Min = 0
		return p, nil
	}
	pm, err := bars("peak device memory (MiB)", mem)
	if err != nil {
		return fmt.Errorf("plotting %s: %w", path, err)
	}
	pm.Title.Text = title + ": peak device memory (MiB)"
	pt, err := bars("tokens/s", speed)
	if err != nil {
		return fmt.Errorf("plotting %s: %w", path, err)
	}
	img := vgimg.New(vg.Points(900), vg.Points(380))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{pm, pt}}, tiles, dc)
	pm.Draw(canvases[0][0])
	pt.Draw(canvases[0][1])
	return savePNG(ctx, img, path)
}

// savePNG writes img to path as a PNG (atomically: a failure, or ctx
// cancelled, leaves the file that was there).
func savePNG(ctx context.Context, img *vgimg.Canvas, path string) error {
	return atomicfile.Write(ctx, path, func(w io.Writer) error {
		_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
		return err
	})
}
