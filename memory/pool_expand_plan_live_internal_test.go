package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanStepsLiveRecordings replays strata's own training from its
// first allocation, recorded on the H100 (testdata/README.md: its setup
// and first 10 steps, of the live gate's runs: 60 warm-up steps and 30
// timed; since session 46 with each allocation's role), then its last
// step 40 times, through an expandable pool with step plans, and holds
// the peak reserved over the repeated steps to what the placement
// reaches now, two pages of slack: gpt2 fp16 with blocks checkpointed
// 1,635 pages for 1,625.1 allocated (1.0061), the char model 454 for
// 446.9 (1.0159), gpt2 bf16 1,634 (1.0055). The whole recorded run (90
// steps) peaks where its first 10 steps and these repeats do, and the
// live runs' figures differ from it by the small pool's pages, which the
// recording leaves out. This replay is the live gate in a unit test:
// session 41's dropOneOffs, which gained on PyTorch's traces and lost on
// the live runs (1.0108 -> 1.0173 on the H100), gives 1,645 pages here
// (1.0122); with a settled planner's plans judged by their footprint
// (session 42) it gives 1,635, one page above the 1,634 of the code
// without either, and live on the H100 the run went from 1.0108 to
// 1.0114, one page (bench/results/gpu-s43.md). The page boundary for
// long-lived whole pages (shortLived) leaves all three where they were,
// as it did live (bench/results/gpu-s46.md); replayed without the roles
// (the recordings before session 46), gpt2 took 1,649 pages, its
// attention scores at the boundary. TestPlanStepsEagerStepsSettle's
// older recordings (9 steps, session 25's train-gpt) did not show the
// loss.
func TestPlanStepsLiveRecordings(t *testing.T) {
	const repeats, last = 40, 10
	for _, tc := range []struct {
		file   string
		period int   // calls a step
		pages  int64 // peak reserved now, in pages
	}{
		{"testdata/live-gpt2-fp16-ckpt-h100.steps.gz", 2504, 1635},
		{"testdata/live-char-fp16-ckpt-h100.steps.gz", 1256, 454},
		{"testdata/live-gpt2-bf16-ckpt-h100.steps.gz", 2500, 1634},
	} {
		t.Run(tc.file, func(t *testing.T) {
			calls := readSteps(t, tc.file)
			step := calls[len(calls)-tc.period:]
			p := NewPool(newHostBackend(TierHost, "host"), PoolConfig{Expandable: true, PlanSteps: true})
			live := map[string]*Block{}
			replaySteps(t, p, calls, live)
			p.ResetPeaks()
			repeatStep(t, p, step, repeats-last)
			before := p.Stats()
			repeatStep(t, p, step, last)
			st := p.Stats()
			t.Logf("peak reserved %d pages, allocated %.1f pages: %.4f; last %d steps: %d pages mapped, %d syncs",
				st.Reserved.Peak/p.page, float64(st.Allocated.Peak)/float64(p.page), float64(st.Reserved.Peak)/float64(st.Allocated.Peak),
				last, st.PagesMapped-before.PagesMapped, st.Syncs-before.Syncs)
			assert.LessOrEqual(t, st.Reserved.Peak, (tc.pages+2)*p.page, "peak reserved pages over the repeated steps")
			assert.Zero(t, st.PagesMapped-before.PagesMapped, "pages mapped in the last %d steps", last)
			assert.Zero(t, st.Syncs-before.Syncs, "synchronisations in the last %d steps", last)
			assert.True(t, p.planner.settled, "the planner settled")
			p.mu.Lock()
			checkExpandable(t, p)
			p.mu.Unlock()
			freeLive(t, p, live)
			require.NoError(t, p.Close())
		})
	}
}
