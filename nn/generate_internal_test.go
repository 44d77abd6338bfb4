package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// draw samples n tokens from logits with o and returns their frequencies.
func draw(t *testing.T, logits []float32, o GenerateOptions, n int) []float64 {
	t.Helper()
	s := newSampler(o, len(logits))
	f := make([]float64, len(logits))
	for range n {
		tok, err := s.pick(logits)
		require.NoError(t, err)
		f[tok]++
	}
	for i := range f {
		f[i] /= float64(n)
	}
	return f
}

func logitsOf(p ...float64) []float32 {
	l := make([]float32, len(p))
	for i, q := range p {
		l[i] = float32(math.Log(q))
	}
	return l
}

// TestSamplerDistribution: the frequencies of sampled tokens follow the
// probabilities that temperature, top-k and top-p define (40000 draws,
// within 0.015).
func TestSamplerDistribution(t *testing.T) {
	logits := logitsOf(0.1, 0.2, 0.3, 0.4)
	norm := func(p ...float64) []float64 {
		var s float64
		for _, q := range p {
			s += q
		}
		for i := range p {
			p[i] /= s
		}
		return p
	}
	sq := func(x float64) float64 { return math.Sqrt(x) }
	for _, tc := range []struct {
		name string
		o    GenerateOptions
		want []float64
	}{
		{"t1", GenerateOptions{Temperature: 1}, []float64{0.1, 0.2, 0.3, 0.4}},
		{"t2", GenerateOptions{Temperature: 2}, norm(sq(0.1), sq(0.2), sq(0.3), sq(0.4))},
		{"t0.5", GenerateOptions{Temperature: 0.5}, norm(0.01, 0.04, 0.09, 0.16)},
		{"topk2", GenerateOptions{Temperature: 1, TopK: 2}, norm(0, 0, 0.3, 0.4)},
		{"topk9", GenerateOptions{Temperature: 1, TopK: 9}, []float64{0.1, 0.2, 0.3, 0.4}},
		{"topp0.5", GenerateOptions{Temperature: 1, TopP: 0.5}, norm(0, 0, 0.3, 0.4)},
		{"topp0.69", GenerateOptions{Temperature: 1, TopP: 0.69}, norm(0, 0, 0.3, 0.4)},
		{"topp0.75", GenerateOptions{Temperature: 1, TopP: 0.75}, norm(0, 0.2, 0.3, 0.4)},
		{"topp0.39", GenerateOptions{Temperature: 1, TopP: 0.39}, []float64{0, 0, 0, 1}},
		{"topp1", GenerateOptions{Temperature: 1, TopP: 1}, []float64{0.1, 0.2, 0.3, 0.4}},
		{"topk3-topp0.6", GenerateOptions{Temperature: 1, TopK: 3, TopP: 0.6}, norm(0, 0, 0.3, 0.4)},
		{"greedy", GenerateOptions{}, []float64{0, 0, 0, 1}},
	} {
		got := draw(t, logits, tc.o, 40000)
		for i := range got {
			require.InDelta(t, tc.want[i], got[i], 0.015, "%s: token %d: %v", tc.name, i, got)
		}
	}
	// Equal logits: greedy and top-k 1 take the lowest id.
	eq := []float32{0, 3, 3, 1}
	for _, o := range []GenerateOptions{{}, {Temperature: 1, TopK: 1}} {
		got := draw(t, eq, o, 100)
		require.Equal(t, 1.0, got[1])
	}
	// A non-finite logit is an error.
	_, err := newSampler(GenerateOptions{}, 2).pick([]float32{0, float32(math.NaN())})
	require.ErrorContains(t, err, "logit 1 is NaN")
}
