package main

import (
	"fmt"
	"io"

	"github.com/strata-ml/strata/memory"
)

// printTables writes the results as markdown tables.
func printTables(w io.Writer, rep *report) {
	fmt.Fprintf(w, "\n## bench-alloc: %s (%s), %s\n\n", rep.Device, rep.Backend, rep.Date)
	if len(rep.Rows) > 0 {
		fmt.Fprintln(w, "| allocator | workload | ns/pair (median) | min | max | runs x pairs | driver calls/pair | backend allocs/pair |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|")
		for _, r := range rep.Rows {
			backend := "always"
			if r.BackendAllocsPerPair >= 0 {
				backend = fmt.Sprintf("%.4f", r.BackendAllocsPerPair)
			}
			fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.1f | %d x %d | %.4f | %s |\n", r.Allocator, r.Workload, r.NsPerPair, r.NsMin, r.NsMax,
				r.Reps, r.Pairs, r.DriverCallsPerPair, backend)
		}
	}
	if rep.Goal != nil {
		fmt.Fprintf(w, "\n| workload | pool vs cuMemAllocAsync | pool expandable vs cuMemAllocAsync | manager vs cuMemAllocAsync | goal: pool | goal: pool expandable |\n")
		fmt.Fprintln(w, "|---|---:|---:|---:|---|---|")
		met := func(ok bool, w workload) string {
			if ok {
				return fmt.Sprintf("met (< %.0f ns, >= %.0fx)", goalNs(w), rep.Goal.Speedup)
			}
			return fmt.Sprintf("not met (< %.0f ns, >= %.0fx)", goalNs(w), rep.Goal.Speedup)
		}
		for _, wl := range workloads {
			exp, expMet := "-", "- (no row)"
			if x, ok := rep.SpeedupExp[wl.name]; ok {
				exp, expMet = fmt.Sprintf("%.1fx", x), met(rep.Goal.MetExpandable[wl.name], wl)
			}
			fmt.Fprintf(w, "| %s | %.1fx | %s | %.1fx | %s | %s |\n", wl.name, rep.SpeedupPool[wl.name], exp,
				rep.SpeedupMgr[wl.name], met(rep.Goal.Met[wl.name], wl), expMet)
		}
	}
	if len(rep.Traces) > 0 {
		fmt.Fprintln(w, "\n| trace | allocs | peak requested | PyTorch reserved (in trace) | ratio | PyTorch, at least | ratio | ours classic | ratio | ns/call | ours expandable | ratio | ns/call | pages mapped / unmapped / syncs |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, t := range rep.Traces {
			bound, boundRatio := memory.FormatBytes(t.TorchPeakReservedLowerBound), fmt.Sprintf("%.3f", t.TorchRatioLowerBound)
			exp := "- | - | - | -"
			if x := t.Expandable; x != nil {
				exp = fmt.Sprintf("%s | %.4f | %.0f | %d / %d / %d", memory.FormatBytes(x.PeakReserved), x.Ratio, x.NsPerCall, x.Maps, x.Unmaps, x.Syncs)
			}
			classic := "- | - | -" // not replayed (-segments expandable)
			if c := t.Classic; c != nil {
				classic = fmt.Sprintf("%s | %.4f | %.0f", memory.FormatBytes(c.PeakReserved), c.Ratio, c.NsPerCall)
			}
			file := t.File
			if t.Scale != 0 {
				file += fmt.Sprintf(" x%g", t.Scale)
				bound, boundRatio = "-", "-" // PyTorch's figures are of the trace as recorded
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %.3f | %s | %s | %s | %s |\n", file, t.Allocs,
				memory.FormatBytes(t.PeakRequested), memory.FormatBytes(t.TorchPeakReserved), t.TorchRatio, bound, boundRatio,
				classic, exp)
		}
		fmt.Fprintln(w, "\nRatios are peak reserved over peak requested bytes. PyTorch served some blocks from segments it reserved")
		fmt.Fprintln(w, "before the trace began; the trace's segment events miss those, so its in-trace figure is too low and the")
		fmt.Fprintln(w, "lower bound adds the most bytes such blocks held at once (blocks allocated before the trace that it frees")
		fmt.Fprintln(w, "included, live from its start). If the trace frees such a segment, the bound is instead the most bytes at")
		fmt.Fprintln(w, "one moment of the segments the trace holds plus the blocks outside them; it is never below the peak live")
		fmt.Fprintln(w, "bytes. ns/call is the time of one pool call (an allocation or a free), backend calls included.")
		for _, t := range rep.Traces {
			// A trace that starts mid-run: its peaks miss what was live before.
			if t.UnmatchedFrees > 0 {
				fmt.Fprintf(w, "\n%s: %d frees of addresses not allocated in the trace at the time (blocks allocated before it began, or freed twice), not replayed: the peak requested counts only blocks allocated in the trace.\n",
					t.File, t.UnmatchedFrees)
				fmt.Fprintf(w, "Counting those blocks live from the trace's start until their frees, at least %s were live at once (%d bytes): a lower bound of what any allocator running the program holds.\n",
					memory.FormatBytes(t.PeakLiveLowerBound), t.PeakLiveLowerBound)
			}
		}
	}
	fmt.Fprintln(w)
}
