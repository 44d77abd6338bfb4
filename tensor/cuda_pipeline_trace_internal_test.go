package tensor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pipelineTimeline runs steps in a scope on dev with the pipelined
// update's timeline on (until the test ends), waits for the overlapped
// updates and returns the timeline's lines.
func pipelineTimeline(t *testing.T, dev *cudaDevice, steps func()) []string {
	on := pipelineTracing
	t.Cleanup(func() { pipelineTracing = on })
	pipelineTracing = true
	WithScope(func() {
		steps()
		require.NoError(t, WaitOverlapped(dev))
	})
	tl, err := PipelineTrace(dev)
	require.NoError(t, err)
	t.Log("\n" + tl)
	return strings.Split(strings.TrimSpace(tl), "\n")
}

// TestGPUPipelineTrace: with the timeline on, two pipelined steps of
// three groups leave the first step whole, a row a group with its start,
// end and the device stream's first wait (the parameters read after the
// step), and the mark recorded after it.
func TestGPUPipelineTrace(t *testing.T) {
	dev := gpuForTest(t)
	lines := pipelineTimeline(t, dev, func() {
		sizes := []int{1 << 20, 3 << 20, 70001, 2 << 20}
		var ps, ms, vs []*Tensor
		for _, n := range sizes {
			ps = append(ps, Full(dev, Float32, 1, n))
			ms = append(ms, Zeros(dev, Float32, n))
			vs = append(vs, Zeros(dev, Float32, n))
		}
		wd := make([]float64, len(sizes))
		for step := 1; step <= 2; step++ {
			var gs []*Tensor
			for _, n := range sizes {
				gs = append(gs, Full(dev, Float32, 0.5, n))
			}
			AdamWStepsPipelined(ps, gs, ms, vs, wd, 1e-2, 0.9, 0.95, 1e-8, step, []int{1, 3, 4}, 0, nil)
			for _, p := range ps {
				Add(p, p).Release() // the device's stream waits for each group here
			}
			TracePipelineMark(dev, "after")
		}
	})
	require.Len(t, lines, 7, "a header, three groups, the summary, the mark and the next step's start")
	for g, l := range lines[1:4] {
		f := strings.Fields(l)
		require.Len(t, f, 6, l)
		assert.Equal(t, []string{"0", "1", "2"}[g], f[0])
		assert.NotEqual(t, "-", f[5], "group %d: the device stream's wait", g)
	}
	assert.Contains(t, lines[4], "update: 3 groups")
	assert.Contains(t, lines[5], "mark after at")
	assert.Contains(t, lines[6], "the next update starts at")
}

// TestGPUPipelineTraceOneGroup: an update of one group is a step of its
// own too. Each step's group 0 followed the last step's group 0, which
// was taken for another run of the same group: no step ever ended, the
// timeline stayed empty and its events piled up.
func TestGPUPipelineTraceOneGroup(t *testing.T) {
	dev := gpuForTest(t)
	lines := pipelineTimeline(t, dev, func() {
		p, m, v := Full(dev, Float32, 1, 4096), Zeros(dev, Float32, 4096), Zeros(dev, Float32, 4096)
		for step := 1; step <= 3; step++ {
			g := Full(dev, Float32, 0.5, 4096)
			AdamWStepsPipelined([]*Tensor{p}, []*Tensor{g}, []*Tensor{m}, []*Tensor{v}, []float64{0}, 1e-2, 0.9, 0.95, 1e-8, step, []int{1}, 0, nil)
			Add(p, p).Release()
			TracePipelineMark(dev, "after")
		}
	})
	require.Len(t, lines, 5, "a header, one group, the summary, the mark and the next step's start")
	assert.Equal(t, "0", strings.Fields(lines[1])[0])
	assert.Contains(t, lines[2], "update: 1 groups")
	assert.Contains(t, lines[3], "mark after at")
	assert.Contains(t, lines[4], "the next update starts at")
	pt := dev.pipeTrace()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	assert.Len(t, pt.cur.groups, 1, "the step being recorded holds its own group only")
}
