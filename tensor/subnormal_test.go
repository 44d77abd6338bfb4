package tensor_test

import (
	"math"
	"testing"

	"github.com/strata-ml/strata/tensor"
)

// TestLogPowSubnormal: float64 Log and Pow of subnormal inputs, against
// a reference that splits x into m·2^e (math.Frexp normalises
// subnormals): Go's amd64 math.Log does not (golang/go#56600), so before
// session 40 (a reviewer helper found it) Log(5e-324) came out -709.09
// where it is -744.44, and Pow, which takes that Log, was off by orders of
// magnitude. PyTorch 1.13 gives the reference's values (-744.4400719213812,
// -713.8013788281542, -708.5030614616061; Pow 4.7292196724417306e+57).
func TestLogPowSubnormal(t *testing.T) {
	ref := func(x float64) float64 {
		m, e := math.Frexp(x)
		return math.Log(m) + float64(e)*math.Ln2
	}
	tensor.WithScope(func() {
		in := []float64{5e-324, 1e-310, 2e-308, 0x1p-1022, 1}
		got := tensor.Log(tensor.FromFloat64s(tensor.CPU(), in, len(in))).Float64s()
		for i, x := range in {
			if want := ref(x); math.Abs(got[i]-want) > 1e-12*math.Abs(want)+1e-15 {
				t.Errorf("Log(%g) = %.16g, want %.16g", x, got[i], want)
			}
		}
		for _, c := range [][2]float64{{5e-324, -0.1783905992226944}, {1e-310, 0.5}, {3e-320, -0.25}, {-5e-324, 3}} {
			want := math.Exp(ref(math.Abs(c[0])) * c[1])
			if c[0] < 0 { // an odd integer power keeps the sign
				want = -want
			}
			got := tensor.Binary(tensor.OpPow, tensor.FromFloat64s(tensor.CPU(), c[:1], 1), tensor.FromFloat64s(tensor.CPU(), c[1:], 1)).Float64s()[0]
			if math.Abs(got-want) > 1e-9*math.Abs(want) {
				t.Errorf("Pow(%g, %g) = %g, want %g", c[0], c[1], got, want)
			}
		}
	})
}
