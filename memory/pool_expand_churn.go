package memory

// Page churn of expandable segments (pool_expand.go).
//
// Growth steals pages from free blocks before it creates any, so a pool
// holds little more than its live bytes (PyTorch's traces: 1.002-1.04
// reserved per byte requested). Some workloads pay for that at every
// step: eager training with checkpointing lays its step out a little
// differently each time and moves pages each step (recorded on the H200,
// gpt2 fp16 with every block checkpointed: 556 pages a step, each a
// cuMemMap and a cuMemUnmap, with a synchronisation every few steps; the
// step ran 0.78x as fast as on classic segments), and a workload that
// never repeats (shapes that change every batch, bench-alloc's random
// mixed pair: 0.005 pages a pair, 325 ns a pair where the classic pool
// takes 116, bench/results/gpu-s25-call2-pair.md) steals forever.
//
// So the pool watches how often it steals, per window of allocations, by
// two detectors (churnDetectors): churnStreak churning windows in a row
// let it hold a step more bytes (a fraction of its peak allocated bytes)
// by creating pages instead of stealing them, up to churnMax: memory for
// speed, as classic segments trade it. Replaying the recorded steps
// (TestExpandableEagerStepsStopChurning): no page moved after 100 gpt2
// steps and 150 of the char model's, at 1.094 and 1.092 reserved per
// allocated byte where classic segments held 1.133 and 1.094 in the same
// training. The random mixed workload over 2 million pairs (memory's
// TestMixedChurn, -pair-churn): 1.17x reserved and 0.0004 pages mapped a
// pair in the second million, where it was 1.062x and 0.0053 without the
// slack, and the classic pool 1.24-1.27x (its best fits follow the host
// addresses, which differ run to run) and no backend call. A recorded trace
// (at most 5,504 allocations) never completes a window, and a training
// loop that settles does so within a window or two (a repeated step of
// 3,000 random requests stole a page per 450 allocations in its second
// slow window, then stopped growing, so no third window closed); both keep
// the slack at zero, and a CUDA graph's replays allocate nothing. A held
// stream (a graph's private pool growing in its capture) takes no slack:
// pages created for it would stay its own until it is released.
// EmptyCache still gives every free page back; the slack only bounds what
// growth may create.

// churnDetectors are the two ways a pool notices churn: a slow one for
// mild, persistent stealing (the random mixed workload: a page per 200
// allocations) and a fast one for heavy stealing, which eager training
// with checkpointing does every step (gpt2 fp16 with every block
// checkpointed, recorded on the H200: 550 pages moved a step of 1,264
// allocations, 0.78x the speed of classic segments). The fast window is
// still longer than a recorded trace of a few steps (PyTorch's: at most
// 5,504 allocations), so replays never earn slack.
var churnDetectors = [...]churnDetector{
	{window: 1 << 16, rate: 1 << 12, step: 1.0 / 16},
	{window: 1 << 13, rate: 1 << 4, step: 1.0 / 32},
}

// churnDetector: a window of window allocations churns when it stole a
// page per rate allocations or more; churnStreak of them in a row add step
// to the slack (a fraction of the peak allocated bytes). The fast
// detector's smaller step lets the pool stop at less memory: gpt2 fp16's
// step stopped moving pages at 1.094x its peak allocated bytes where
// steps of 1/16 went on to 1.125 (classic segments: 1.133).
type churnDetector struct {
	window, rate int64
	step         float64
}

const (
	// churnStreak is the churning windows in a row that earn slack.
	churnStreak = 3
	// churnMax is the most slack, a fraction of the peak allocated bytes.
	churnMax = 3.0 / 16
)

// churn is an expandable pool's record of its stealing, a window per
// detector, and the slack it earned.
type churn struct {
	windows [len(churnDetectors)]churnWindow
	slack   float64 // the pool may create pages up to (1+slack) x its peak allocated bytes
}

// churnWindow is one detector's current window.
type churnWindow struct {
	start  int64 // the pool's Allocs count where the window began
	stolen int64 // pages stolen since then
	streak int   // churning windows in a row, up to the last one closed
}

// stole records n pages stolen.
func (c *churn) stole(n int) {
	for i := range c.windows {
		c.windows[i].stolen += int64(n)
	}
}

// churnRoom returns how many of the n pages growth needs the pool creates
// instead of stealing, closing the windows that are over first. A window
// closes at the first growth after its detector's window of allocations;
// it churned when its rate of stealing, over however many allocations it
// lasted, reached its detector's rate. churnStreak churning windows in a
// row of a detector add its step, and start its streak again: the slack
// grows further only if the churn outlasts it.
func (p *Pool) churnRoom(n int) int {
	c := &p.churnState
	allocs := p.sinks.own.Allocs
	for i, d := range churnDetectors {
		w := &c.windows[i]
		if allocs-w.start < d.window {
			continue
		}
		w.streak++
		if w.stolen*d.rate < allocs-w.start {
			w.streak = 0
		}
		if w.streak >= churnStreak {
			c.slack = min(c.slack+d.step, churnMax)
			w.streak = 0 // the next step only if churn outlasts this one
		}
		w.start, w.stolen = allocs, 0
	}
	if c.slack == 0 {
		return 0
	}
	// The pool's own bytes, not held's: what shares its Limit (a manager's
	// managed tier, Hold) would otherwise eat the slack.
	u := &p.sinks.own
	allowed := int64(float64(u.Allocated.Peak) * (1 + c.slack))
	return int(max(0, min((allowed-u.Reserved.Current)/p.page, int64(n))))
}

// createRoom creates up to k pages for growth within the slack, stopping
// at the pool's Limit or when the backend is out of memory (stealing then
// serves the rest); another error of the backend is returned with the
// pages created so far.
func (p *Pool) createRoom(k int) ([]Page, error) {
	var pages []Page
	for len(pages) < k {
		pg, err := p.createPage(len(pages))
		if isOOM(err) { // the Limit or the backend's memory
			break
		}
		if err != nil {
			return pages, err
		}
		pages = append(pages, pg)
	}
	return pages, nil
}
