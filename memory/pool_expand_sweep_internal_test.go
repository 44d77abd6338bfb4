package memory

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The scale sweep of expandable segments (issue 12): replays both shared
// traces with every size scaled, as bench-alloc -scale does, and prints
// reserved/requested per scale with the mean, the maximum and the count
// above 1.02; with -expandable-sweep-dump also the partial pages (pages
// holding live bytes and free ones) at the moment each replay reached its
// peak reserved, with their live blocks (size@trace line of the
// allocation, or L<pages> for blocks of 8 pages or more). Off unless
// asked:
//
//	go test ./memory -run TestExpandableScaleSweep -v -expandable-sweep 40
//	go test ./memory -run TestExpandableScaleSweep -v -expandable-sweep 60-other -expandable-sweep-plan
//	go test ./memory -run TestExpandableScaleSweep -v -expandable-sweep 0.37 -expandable-sweep-dump
//	go test ./memory -run TestExpandableScaleSweep -v -expandable-sweep 1 -expandable-sweep-traces all
//
// (40: 40 scales from 0.2 to 4, 0.2*20^(i/39); 60-other: 60 scales
// between them, 0.21*(3.8/0.21)^((i+0.37)/60), another sample; else a
// comma-separated list; -expandable-sweep-plan: with PlanSteps). No
// timing: bench-alloc times the replays. Each trace's line also gives the
// least ratio any placement in whole pages could reach (the peak
// allocated, rounded up to pages, over the peak requested).
var anaScales = flag.String("expandable-sweep", "", "scales for TestExpandableScaleSweep: a count of log-spaced scales from 0.2 to 4, or a comma-separated list")
var anaTiny = flag.Int64("expandable-sweep-tiny", 0, "experiment: requests up to this many bytes on stream 1 (a range and index of their own)")
var anaPlan = flag.Bool("expandable-sweep-plan", false, "TestExpandableScaleSweep replays with PoolConfig.PlanSteps")
var anaTraces = flag.String("expandable-sweep-traces", "", "TestExpandableScaleSweep's traces: comma-separated names in bench/traces, or all (default: the two shared ones)")
var anaDump = flag.Bool("expandable-sweep-dump", false, "TestExpandableScaleSweep prints the partial pages at each replay's peak reserved")

type anaOp struct {
	free bool
	slot int
	size int64
	ev   int
}

func anaLoad(t *testing.T, name string) ([]anaOp, int) {
	data, err := os.ReadFile(filepath.Join("..", "bench", "traces", name))
	if err != nil {
		t.Skip(err)
	}
	live := map[string]int{}
	var ops []anaOp
	var freeSlots []int
	slots := 0
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
		f := strings.Split(line, ",")
		switch f[0] {
		case "alloc":
			n, _ := strconv.ParseInt(f[2], 10, 64)
			s := slots
			if k := len(freeSlots); k > 0 {
				s, freeSlots = freeSlots[k-1], freeSlots[:k-1]
			} else {
				slots++
			}
			live[f[1]] = s
			ops = append(ops, anaOp{slot: s, size: n, ev: i})
		case "free_completed":
			if s, ok := live[f[1]]; ok {
				ops = append(ops, anaOp{free: true, slot: s, ev: i})
				delete(live, f[1])
				freeSlots = append(freeSlots, s)
			}
		}
	}
	return ops, slots
}

// anaReplay returns the replay's peak reserved/requested and peak
// requested, and the least ratio any placement in whole pages could
// reach: the peak of the bytes allocated (rounded as the pool rounds)
// in whole pages over the peak requested.
func anaReplay(t *testing.T, ops []anaOp, slots int, scale float64, dump bool) (float64, int64, float64) {
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: *anaPlan})
	blocks := make([]*Block, slots)
	born := map[*Block]int{}
	var peakRes, stitched int64
	var snap string
	for _, op := range ops {
		if op.free {
			if err := p.Free(blocks[op.slot]); err != nil {
				t.Fatal(err)
			}
			blocks[op.slot] = nil
			continue
		}
		n := max(1, int64(math.Round(float64(op.size)*scale)))
		var st Stream
		if n <= *anaTiny {
			st = 1
		}
		b, err := p.Alloc(n, st)
		if err != nil {
			t.Fatal(err)
		}
		blocks[op.slot] = b
		born[b] = op.ev + 2 // the trace line
		if *anaStitch {
			stitched = max(stitched, stitchedPages(p))
		}
		if r := p.Stats().Reserved.Current; r > peakRes {
			peakRes = r
			if dump {
				snap = anaSnap(p, born, op.ev+2)
			}
		}
	}
	st := p.Stats()
	for _, b := range blocks {
		if b != nil {
			p.Free(b)
		}
	}
	p.Close()
	if dump {
		fmt.Println(snap)
	}
	pages := (st.Allocated.Peak + p.page - 1) / p.page
	if *anaStitch {
		anaStitched = float64(stitched*p.page) / float64(st.Requested.Peak)
	}
	return float64(st.Reserved.Peak) / float64(st.Requested.Peak), st.Requested.Peak,
		float64(pages*p.page) / float64(st.Requested.Peak)
}

func anaSnap(p *Pool, born map[*Block]int, ev int) string {
	var sb strings.Builder
	g := p.page
	fmt.Fprintf(&sb, "peak reserved reached at trace line %d: %d pages, allocated %d bytes\n", ev, p.Stats().Reserved.Current/g, p.Stats().Allocated.Current)
	for seg := p.segs; seg != nil; seg = seg.next {
		base := seg.region.Addr
		liveIn := map[int64]int64{}
		desc := map[int64][]string{}
		largeIn := map[int64]bool{}
		for b := seg.first; b != nil; b = b.next {
			if b.state != blockLive {
				continue
			}
			off := int64(b.addr - base)
			for pg := off / g; pg*g < off+b.size; pg++ {
				l, h := max(off, pg*g), min(off+b.size, (pg+1)*g)
				liveIn[pg] += h - l
				if b.size > SmallSize {
					largeIn[pg] = true
				}
				if b.size < 8*g {
					desc[pg] = append(desc[pg], fmt.Sprintf("%d@%d", b.size, born[b]))
				} else {
					desc[pg] = append(desc[pg], fmt.Sprintf("L%d", b.size/g))
				}
			}
		}
		var keys []int64
		for k := range liveIn {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		var waste, wasteSmall int64
		for _, k := range keys {
			if liveIn[k] < g {
				waste += g - liveIn[k]
				if !largeIn[k] {
					wasteSmall += g - liveIn[k]
				}
				fmt.Fprintf(&sb, "  page %d live %.3f MiB: %v\n", k, float64(liveIn[k])/(1<<20), desc[k])
			}
		}
		fmt.Fprintf(&sb, " segment: %d pages with live bytes, %.2f pages' worth free in them (%.2f in pages holding only blocks under 1 MiB)\n",
			len(keys), float64(waste)/float64(g), float64(wasteSmall)/float64(g))
	}
	return sb.String()
}

// TestExpandableScaleSweep: see -expandable-sweep.
func TestExpandableScaleSweep(t *testing.T) {
	if *anaScales == "" {
		t.Skip()
	}
	var scales []float64
	if *anaScales == "60-other" {
		for i := range 60 {
			scales = append(scales, 0.21*math.Pow(3.8/0.21, (float64(i)+0.37)/60))
		}
	} else if n, err := strconv.Atoi(*anaScales); err == nil && n > 1 {
		for i := 0; i < n; i++ {
			scales = append(scales, 0.2*math.Pow(20, float64(i)/float64(n-1)))
		}
	} else {
		for _, s := range strings.Split(*anaScales, ",") {
			v, _ := strconv.ParseFloat(s, 64)
			scales = append(scales, v)
		}
	}
	for _, name := range anaTraceNames(t) {
		ops, slots := anaLoad(t, name)
		var sum, mx, bsum, bmx float64
		over, bover := 0, 0
		line := ""
		for _, s := range scales {
			r, _, bound := anaReplay(t, ops, slots, s, *anaDump)
			sum += r
			mx = max(mx, r)
			bsum += bound
			bmx = max(bmx, bound)
			if r > 1.02 {
				over++
			}
			if bound > 1.02 {
				bover++
			}
			line += fmt.Sprintf(" %.3g:%.4f", s, r)
			if *anaStitch {
				line += fmt.Sprintf("/%.4f", anaStitched)
			}
		}
		n := float64(len(scales))
		fmt.Printf("%s mean %.4f max %.4f over %d/%d (whole pages of the peak allocated: mean %.4f max %.4f over %d)\n%s\n",
			name, sum/n, mx, over, len(scales), bsum/n, bmx, bover, line)
	}
}

// anaStitched is the last replay's stitching bound (-expandable-sweep-stitch).
var anaStitched float64

// anaTraceNames is -expandable-sweep-traces: the traces to sweep.
func anaTraceNames(t *testing.T) []string {
	switch *anaTraces {
	case "":
		return []string{"trace-char-fp32.csv", "trace-char-fp16-ckpt.csv"}
	case "all":
		names, err := filepath.Glob(filepath.Join("..", "bench", "traces", "trace-*.csv"))
		if err != nil || len(names) == 0 {
			t.Fatalf("no traces in ../bench/traces: %v", err)
		}
		for i, n := range names {
			names[i] = filepath.Base(n)
		}
		return names
	}
	return strings.Split(*anaTraces, ",")
}
