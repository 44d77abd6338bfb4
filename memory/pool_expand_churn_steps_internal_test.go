package memory

import (
	"bufio"
	"compress/gzip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stepsCall is one pool call of a recorded run (testdata/README.md):
// recordings from session 46 on carry each allocation's role; older
// ones replay as RoleOther, as Pool.Alloc asks.
type stepsCall struct {
	alloc  bool
	id     string
	size   int64
	stream Stream
	role   Role
}

func readSteps(t *testing.T, path string) []stepsCall {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	var calls []stepsCall
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		switch {
		case (len(w) == 4 || len(w) == 5) && w[0] == "a":
			size, err := strconv.ParseInt(w[2], 10, 64)
			require.NoError(t, err)
			s, err := strconv.ParseUint(w[3], 10, 64)
			require.NoError(t, err)
			role := RoleOther
			if len(w) == 5 {
				r, err := strconv.ParseUint(w[4], 10, 8)
				require.NoError(t, err)
				require.Less(t, r, uint64(NumRoles), "%s: bad role in %q", path, sc.Text())
				role = Role(r)
			}
			calls = append(calls, stepsCall{alloc: true, id: w[1], size: size, stream: Stream(s), role: role})
		case len(w) == 2 && w[0] == "f":
			calls = append(calls, stepsCall{id: w[1]})
		default:
			t.Fatalf("%s: bad line %q", path, sc.Text())
		}
	}
	require.NoError(t, sc.Err())
	return calls
}

// replaySteps makes calls on p, blocks by id in live.
func replaySteps(t *testing.T, p *Pool, calls []stepsCall, live map[string]*Block) {
	for _, c := range calls {
		if c.alloc {
			p.mu.Lock()
			b, err := p.alloc(c.size, c.stream, 0, c.role, "")
			p.mu.Unlock()
			require.NoError(t, err)
			live[c.id] = b
			continue
		}
		require.NoError(t, p.Free(live[c.id]))
		delete(live, c.id)
	}
}

// repeatStep replays one recorded step on p n times; a step frees what it
// allocates.
func repeatStep(t *testing.T, p *Pool, step []stepsCall, n int) {
	for range n {
		replaySteps(t, p, step, map[string]*Block{})
	}
}

// freeLive frees the blocks a replay left live.
func freeLive(t *testing.T, p *Pool, live map[string]*Block) {
	for id, b := range live {
		require.NoError(t, p.Free(b), id)
	}
}

// TestExpandableEagerStepsStopChurning replays eager training steps
// recorded on the H200 (testdata/README.md), the last step again and
// again. Each moves hundreds of pages at first (stealing them from free
// blocks that the step's layout leaves in other places, every step);
// the fast churn detector gives the pool slack within 100 steps (150 of
// the smaller model's), after which a step maps no page, at less memory than classic segments
// held in the same training on the H200 (1.133 and 1.094 peak reserved /
// peak allocated, bench/results/gpu-s25-call5-summary.txt) and, for gpt2
// fp32, than PyTorch's best.
func TestExpandableEagerStepsStopChurning(t *testing.T) {
	for _, tc := range []struct {
		file      string
		period    int
		maxRatio  float64
		firstStep int64 // pages the first repeated step maps, at least
		settle    int   // steps after which none maps a page
	}{
		// The slow detector alone (windows of 65,536 allocations) would
		// earn no slack in either's settling steps.
		{"testdata/eager-gpt2-fp16-ckpt-h200.steps.gz", 2528, 1.133, 400, 100},
		{"testdata/eager-char-fp16-ckpt-h200.steps.gz", 1268, 1.094, 80, 150},
		// gpt2 fp32 (session 26): 265 and 49 pages in turn, settled after
		// 29 steps at 1.016; the bound is PyTorch's best on the same model
		// (expandable segments, ../shared/anchors/torch_frag.jsonl), which
		// the H200 run beat at 1.018 (classic 1.110,
		// bench/results/hybrid-2026-12-04-s26.md).
		{"testdata/eager-gpt2-fp32-h200.steps.gz", 1354, 1.043, 200, 40},
	} {
		t.Run(tc.file, func(t *testing.T) {
			calls := readSteps(t, tc.file)
			require.Greater(t, len(calls), 2*tc.period)
			p := NewPool(newHostBackend(TierHost, "host"), PoolConfig{Expandable: true})
			defer func() { require.NoError(t, p.Close()) }()
			live := map[string]*Block{}
			replaySteps(t, p, calls, live)
			step := calls[len(calls)-tc.period:]
			mapped := func() int64 { return p.Stats().PagesMapped }
			before := mapped()
			repeatStep(t, p, step, 1)
			first := mapped() - before
			assert.GreaterOrEqual(t, first, tc.firstStep, "the recorded step churns before the pool earns slack")
			repeatStep(t, p, step, tc.settle-1)
			before = mapped()
			repeatStep(t, p, step, 50)
			assert.Zero(t, mapped()-before, "pages mapped in the 50 steps after %d", tc.settle)
			st := p.Stats()
			ratio := float64(st.Reserved.Peak) / float64(st.Allocated.Peak)
			t.Logf("first step %d pages mapped; slack %.4f; peak reserved / peak allocated %.4f", first, p.churnState.slack, ratio)
			assert.Positive(t, p.churnState.slack)
			assert.LessOrEqual(t, ratio, tc.maxRatio)
			checkExpandable(t, p)
			freeLive(t, p, live)
		})
	}
}
