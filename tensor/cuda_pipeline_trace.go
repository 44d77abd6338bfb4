package tensor

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// EnvPipelineTrace turns on the pipelined update's timeline on CUDA
// devices (STRATA_PIPELINE_TRACE=1): timing events around each group's
// launch on the side stream and where the device's stream first waits
// for the group (the forward pass reaching its parameters), and the marks
// of TracePipelineMark. PipelineTrace prints the last complete step. The
// events cost a few driver calls a group; off, one branch a group.
const EnvPipelineTrace = "STRATA_PIPELINE_TRACE"

var pipelineTracing = os.Getenv(EnvPipelineTrace) != ""

// pipeTrace is a device's timeline of pipelined updates: cur is the step
// being recorded (from its first group), last the one before it, whole.
type pipeTrace struct {
	mu        sync.Mutex
	cur, last pipeStep
	free      []*cuda.Event
	// newStep is set when an update begins (traceStep): its first group
	// starts a new step. The group index alone cannot tell: an update of
	// one group is group 0 after group 0, as is a group of several runs.
	newStep bool
}

type pipeStep struct {
	groups []*pipeGroup
	marks  []pipeMark
}

// pipeGroup is one group's update: its bytes read and written over the
// bus (its moments and parameters in host memory: the offload, staging
// and host tiers; managed memory is the device's), the events
// around its launch on the side stream and the device stream's first wait
// for it (nil until then).
type pipeGroup struct {
	group            int
	bus              int64
	start, end, join *cuda.Event
}

type pipeMark struct {
	name string
	ev   *cuda.Event
}

// event returns a timing event recorded on s.
func (p *pipeTrace) event(d *cudaDevice, s *cuda.Stream) *cuda.Event {
	var ev *cuda.Event
	if n := len(p.free); n > 0 {
		ev, p.free = p.free[n-1], p.free[:n-1]
	} else {
		var err error
		ev, err = d.ctx.NewEvent(cuda.EventDefault)
		d.check("PipelineTrace", "creating a timing event", err)
	}
	d.check("PipelineTrace", "recording a timing event", ev.Record(s))
	return ev
}

// recycle hands st's events back.
func (p *pipeTrace) recycle(st pipeStep) {
	for _, g := range st.groups {
		for _, ev := range [...]*cuda.Event{g.start, g.end, g.join} {
			if ev != nil {
				p.free = append(p.free, ev)
			}
		}
	}
	for _, m := range st.marks {
		p.free = append(p.free, m.ev)
	}
}

// traceStep marks the start of a pipelined update on d: its first group
// begins a new step of the timeline.
func (d *cudaDevice) traceStep() {
	if !pipelineTracing {
		return
	}
	p := d.pipeTrace()
	p.mu.Lock()
	p.newStep = true
	p.mu.Unlock()
}

// traceGroupStart records group g's start on side stream s (the first
// group of an update starts a new step) and returns its record, nil when
// tracing is off.
func (d *cudaDevice) traceGroupStart(s *cudaSide, g int, ts ...[]*Tensor) *pipeGroup {
	if !pipelineTracing {
		return nil
	}
	p := d.pipeTrace()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.newStep {
		p.newStep = false
		if len(p.cur.groups) > 0 {
			p.recycle(p.last)
			p.last, p.cur = p.cur, pipeStep{}
		}
	}
	r := &pipeGroup{group: g, start: p.event(d, s.stream)}
	for _, list := range ts {
		for _, t := range list {
			if tier := t.ref.st.alloc.Tier(); tier == memory.TierOffload || tier == memory.TierStaging || tier == memory.TierHost {
				r.bus += t.Bytes()
			}
		}
	}
	p.cur.groups = append(p.cur.groups, r)
	return r
}

// traceGroupEnd records the end of r's update on stream st: the side
// stream after its launches, or the copy ring's write-back stream when
// the group's moments went through the ring.
func (d *cudaDevice) traceGroupEnd(st *cuda.Stream, r *pipeGroup) {
	if r == nil {
		return
	}
	p := d.pipeTrace()
	p.mu.Lock()
	defer p.mu.Unlock()
	r.end = p.event(d, st)
}

// traceJoin records, the first time, where the device's stream waits for
// r's group.
func (d *cudaDevice) traceJoin(r *pipeGroup) {
	p := d.pipeTrace()
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.join == nil {
		r.join = p.event(d, d.stream)
	}
}

func (d *cudaDevice) pipeTrace() *pipeTrace {
	d.ptraceOnce.Do(func() { d.ptrace = &pipeTrace{} })
	return d.ptrace
}

// TracePipelineMark records a point named name on dev's stream in the
// pipelined update's timeline (the end of the forward pass beside it, say);
// nothing unless STRATA_PIPELINE_TRACE is set and dev is a GPU.
func TracePipelineMark(dev Device, name string) {
	d, ok := dev.(*cudaDevice)
	if !ok || !pipelineTracing {
		return
	}
	p := d.pipeTrace()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cur.groups) > 0 {
		p.cur.marks = append(p.cur.marks, pipeMark{name: name, ev: p.event(d, d.stream)})
	}
}

// PipelineTrace waits for dev and returns the timeline of the last whole
// pipelined update recorded under STRATA_PIPELINE_TRACE, in milliseconds
// from its first group's start: each group's launch on the side stream,
// its bytes over the bus each way and their rate, and where the device's
// stream first waited for it, then the marks and the start of the next
// update when one was recorded; "" when there is none.
func PipelineTrace(dev Device) (string, error) {
	d, ok := dev.(*cudaDevice)
	if !ok || !pipelineTracing {
		return "", nil
	}
	if err := d.Synchronize(); err != nil {
		return "", err
	}
	p := d.pipeTrace()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.last
	if len(st.groups) == 0 {
		return "", nil
	}
	t0 := st.groups[0].start
	ms := func(ev *cuda.Event) string {
		if ev == nil {
			return "-"
		}
		f, err := elapsedMS(t0, ev)
		if err != nil {
			return "?"
		}
		return fmt.Sprintf("%.2f", f)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "group\tbus MiB each way\tstart ms\tend ms\tGB/s each way\tforward waits from ms\t")
	var bus int64
	for _, g := range st.groups {
		rate := "-"
		if f, err := elapsedMS(g.start, g.end); err == nil && f > 0 {
			rate = fmt.Sprintf("%.1f", float64(g.bus)/f/1e6)
		}
		bus += g.bus
		fmt.Fprintf(tw, "%d\t%.1f\t%s\t%s\t%s\t%s\t\n", g.group, float64(g.bus)/(1<<20), ms(g.start), ms(g.end), rate, ms(g.join))
	}
	if err := tw.Flush(); err != nil {
		return "", err
	}
	end := st.groups[len(st.groups)-1].end
	if f, err := elapsedMS(t0, end); err == nil && f > 0 {
		fmt.Fprintf(&b, "update: %d groups, %.1f MiB each way over the bus in %.2f ms (%.1f GB/s each way)\n", len(st.groups), float64(bus)/(1<<20), f, float64(bus)/f/1e6)
	}
	for _, m := range st.marks {
		fmt.Fprintf(&b, "mark %s at %s ms", m.name, ms(m.ev))
		if f, err := elapsedMS(end, m.ev); err == nil {
			fmt.Fprintf(&b, " (%.2f ms after the last group's end)", f)
		}
		b.WriteString("\n")
	}
	if len(p.cur.groups) > 0 {
		next := p.cur.groups[0].start
		fmt.Fprintf(&b, "the next update starts at %s ms", ms(next))
		if n := len(st.marks); n > 0 {
			if f, err := elapsedMS(st.marks[n-1].ev, next); err == nil {
				fmt.Fprintf(&b, " (%.2f ms after mark %s)", f, st.marks[n-1].name)
			}
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// elapsedMS is the GPU time from a to b in milliseconds (negative when b
// came first).
func elapsedMS(a, b *cuda.Event) (float64, error) {
	if a == nil || b == nil {
		return 0, fmt.Errorf("no event")
	}
	t, err := cuda.ElapsedTime(a, b)
	return float64(t) / float64(time.Millisecond), err
}
