package tensor_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

var cpu = tensor.CPU()

func seq(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i)
	}
	return v
}

func TestViewsShareStorageAndIndexCorrectly(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, seq(24), 2, 3, 4)
		tr := x.Transpose(0, 2) // (4, 3, 2)
		require.True(t, tr.SharesStorage(x))
		require.False(t, tr.IsContiguous())
		got := tr.Float64s()
		for i := range 4 {
			for j := range 3 {
				for k := range 2 {
					require.Equal(t, float64(k*12+j*4+i), got[i*6+j*2+k])
				}
			}
		}
		n := x.Narrow(2, 1, 2) // (2, 3, 2)
		require.Equal(t, []float64{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}, n.Float64s())
		p := x.Permute(1, 2, 0)
		require.Equal(t, []int{3, 4, 2}, p.Shape())
		require.Equal(t, []float64{0, 12, 1, 13}, p.Narrow(0, 0, 1).Narrow(1, 0, 2).Float64s())
		r := tr.Reshape(-1) // non-contiguous: a copy
		require.False(t, r.SharesStorage(x))
		require.Equal(t, got, r.Float64s())
		e := tensor.FromFloat64s(cpu, []float64{1, 2, 3}, 3, 1).Expand(3, 4)
		require.Equal(t, []float64{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, e.Float64s())
		u := x.Unsqueeze(1).Squeeze(1)
		require.Equal(t, x.Float64s(), u.Float64s())
		parts := x.Split(3, 2)
		require.Len(t, parts, 2)
		require.Equal(t, []int{2, 3, 1}, parts[1].Shape())
		c := tensor.Concat(2, parts...)
		require.Equal(t, x.Float64s(), c.Float64s())
	})
}

func TestScopesReleaseAndKeep(t *testing.T) {
	mem := cpu.Memory()
	before := mem.InUse()
	var kept *tensor.Tensor
	s := tensor.NewScope()
	a := tensor.Ones(cpu, tensor.Float32, 100)
	v := a.Reshape(10, 10)
	kept = tensor.Add(a, a)
	tensor.Keep(kept)
	inner := tensor.Tidy(func() *tensor.Tensor {
		tmp := tensor.Scale(a, 3)
		return tensor.Add(tmp, a)
	})
	require.Equal(t, 3, s.Len()) // a, v, inner (kept is untracked); Tidy's tmp is gone
	s.Close()
	require.True(t, a.Released())
	require.True(t, v.Released())
	require.True(t, inner.Released())
	require.False(t, kept.Released())
	require.Equal(t, []float32{2, 2}, kept.Float32s()[:2])
	kept.Release()
	kept.Release() // idempotent
	require.Equal(t, before, mem.InUse())
	err := tensor.Try(func() { a.Float32s() })
	require.ErrorIs(t, err, tensor.ErrReleased)
}

// TestTidyLeavesWhatItDidNotCreate: Tidy moves the tensor fn returns to
// the enclosing scope only when fn created it; a kept tensor (a
// parameter passed through) or an outer scope's stays where it was, so
// closing the enclosing scope does not release a parameter.
func TestTidyLeavesWhatItDidNotCreate(t *testing.T) {
	param := tensor.Ones(cpu, tensor.Float32, 4)
	tensor.Keep(param)
	defer param.Release()
	outer := tensor.NewScope()
	x := tensor.Ones(cpu, tensor.Float32, 4)
	s := tensor.NewScope()
	require.Same(t, param, tensor.Tidy(func() *tensor.Tensor { return param }))
	require.Same(t, x, tensor.Tidy(func() *tensor.Tensor { return x }))
	require.Equal(t, 0, s.Len())
	s.Close()
	require.False(t, param.Released())
	require.False(t, x.Released())
	outer.Close()
	require.True(t, x.Released())
	require.False(t, param.Released())
	require.Equal(t, []float32{1, 1, 1, 1}, param.Float32s())
}

func TestErrorsNameTheProblem(t *testing.T) {
	tensor.WithScope(func() {
		a := tensor.Zeros(cpu, tensor.Float32, 2, 3)
		b := tensor.Zeros(cpu, tensor.Float32, 4, 5)
		err := tensor.Try(func() { tensor.MatMul(a, b) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "MatMul")
		require.ErrorContains(t, err, "[2 3]")
		err = tensor.Try(func() { tensor.Add(a, b) })
		require.ErrorIs(t, err, tensor.ErrShape)
		err = tensor.Try(func() { tensor.Add(a, tensor.Zeros(cpu, tensor.Float64, 2, 3)) })
		require.ErrorIs(t, err, tensor.ErrDType)
		err = tensor.Try(func() { a.Reshape(7) })
		require.ErrorIs(t, err, tensor.ErrShape)
		table := tensor.Zeros(cpu, tensor.Float32, 4, 2)
		err = tensor.Try(func() { tensor.Embedding(table, tensor.FromInt32s(cpu, []int32{1, 9})) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "9")
		err = tensor.Try(func() {
			tensor.CrossEntropy(tensor.Zeros(cpu, tensor.Float32, 2, 3), tensor.FromInt32s(cpu, []int32{0, 3}), -100)
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
		// Concat checks every operand before it allocates.
		err = tensor.Try(func() { tensor.Concat(0, a, tensor.Zeros(cpu, tensor.Float32, 3)) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "Concat")
		err = tensor.Try(func() { tensor.Concat(0, a, tensor.Zeros(cpu, tensor.Float32, 2, 4)) })
		require.ErrorIs(t, err, tensor.ErrShape)
		err = tensor.Try(func() { tensor.Concat(1, a, tensor.Zeros(cpu, tensor.Float64, 2, 3)) })
		require.ErrorIs(t, err, tensor.ErrDType)
		// Checks the ops make for every backend.
		v := tensor.Ones(cpu, tensor.Float32, 3)
		err = tensor.Try(func() { tensor.UnaryBackward(tensor.OpLog, nil, v, v) })
		require.ErrorIs(t, err, tensor.ErrArgument) // Log's backward reads x
		require.ErrorContains(t, err, "LogBackward")
		err = tensor.Try(func() { tensor.SGDStep(v, v, nil, 0.1, 0, 0, true) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "nesterov")
		err = tensor.Try(func() { tensor.LayerNorm(tensor.Zeros(cpu, tensor.Float32, 2, 0), v, nil, 1e-5) }) // rows of 0, a weight of 3
		require.ErrorIs(t, err, tensor.ErrShape)
		x, _, _ := tensor.LayerNorm(a, nil, nil, 1e-5)
		_, mean, rstd := tensor.LayerNorm(a, nil, nil, 1e-5)
		err = tensor.Try(func() { tensor.LayerNormBackward(x, a, mean, rstd, v.Reshape(3, 1), true) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "weight")
		// A view whose 17 dims cannot merge is more than the strided
		// kernels take (internal/layout.MaxDims).
		deep := make([]int, 17)
		rev := make([]int, 17)
		for i := range deep {
			deep[i], rev[i] = 2, 16-i
		}
		p := tensor.Zeros(cpu, tensor.Float32, 1<<17).Reshape(deep...).Permute(rev...)
		err = tensor.Try(func() { p.Clone() })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "Clone")
		require.NotPanics(t, func() { p.Narrow(0, 0, 1).Clone() }, "16 dims fit")
		// Indices must be int32 in every op that takes them.
		logits, fids := tensor.Zeros(cpu, tensor.Float32, 2, 3), tensor.Zeros(cpu, tensor.Float32, 2)
		for name, f := range map[string]func(){
			"Embedding":            func() { tensor.Embedding(table, fids) },
			"EmbeddingBackward":    func() { tensor.EmbeddingBackward(fids, tensor.Zeros(cpu, tensor.Float32, 2, 2), 4) },
			"CrossEntropy":         func() { tensor.CrossEntropy(logits, fids, -100) },
			"CrossEntropyBackward": func() { tensor.CrossEntropyBackward(logits, fids, tensor.Ones(cpu, tensor.Float32, 2), -100) },
		} {
			err = tensor.Try(f)
			require.ErrorIs(t, err, tensor.ErrDType, name)
			require.ErrorContains(t, err, name+": ")
			require.ErrorContains(t, err, "want int32", name)
		}
		_, err = tensor.New(cpu, tensor.Float32, memory.RoleOther, 2, -1)
		require.ErrorIs(t, err, tensor.ErrShape)
		_, err = tensor.ParseDevice("tpu")
		require.ErrorIs(t, err, tensor.ErrDevice)
		_, err = tensor.ParseDType("float8")
		require.ErrorIs(t, err, tensor.ErrDType)
	})
}

func TestOutOfMemoryIsAnError(t *testing.T) {
	_, err := tensor.New(cpu, tensor.Float32, memory.RoleActivation, 1<<40, 1<<10)
	require.Error(t, err)
	require.True(t, errors.Is(err, memory.ErrOutOfMemory) || errors.Is(err, tensor.ErrShape), "%v", err)
}

// refMatMul is a float64 triple loop over row-major (b, m, k) @ (b, k, n).
func refMatMul(a, b []float64, batch, m, k, n int, bBatched bool) []float64 {
	c := make([]float64, batch*m*n)
	for p := range batch {
		bo := 0
		if bBatched {
			bo = p * k * n
		}
		for i := range m {
			for j := range n {
				var s float64
				for l := range k {
					s += a[p*m*k+i*k+l] * b[bo+l*n+j]
				}
				c[p*m*n+i*n+j] = s
			}
		}
	}
	return c
}

func TestMatMulLayoutsAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		tensor.WithScope(func() {
			const B, M, K, N = 3, 5, 7, 4
			a := tensor.RandN(cpu, tensor.Float64, rng, 1, B, M, K)
			b := tensor.RandN(cpu, tensor.Float64, rng, 1, B, K, N)
			w := tensor.RandN(cpu, tensor.Float64, rng, 1, K, N)
			want := refMatMul(a.Float64s(), b.Float64s(), B, M, K, N, true)
			wantShared := refMatMul(a.Float64s(), w.Float64s(), B, M, K, N, false)
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			A, Bm, W := a.To(dt), b.To(dt), w.To(dt)
			check := func(name string, got *tensor.Tensor, want []float64) {
				g := got.Float64s()
				for i := range want {
					require.InDelta(t, want[i], g[i], tol*(1+math.Abs(want[i])), "%s %v element %d", name, dt, i)
				}
			}
			check("batched", tensor.MatMul(A, Bm), want)
			check("shared", tensor.MatMul(A, W), wantShared)
			// The same products from transposed storage (views, no copies).
			at := A.Transpose(1, 2).Contiguous().Transpose(1, 2)
			bt := Bm.Transpose(1, 2).Contiguous().Transpose(1, 2)
			check("transposed", tensor.MatMul(at, bt), want)
			wt := W.T().Contiguous().T()
			check("shared transposed", tensor.MatMul(at, wt), wantShared)
			// A permuted, non-collapsible batch: copied internally.
			ap := A.Permute(1, 0, 2).Contiguous().Permute(1, 0, 2)
			check("permuted batch", tensor.MatMul(ap, Bm), want)
			check("broadcast left", tensor.MatMul(W.T().Unsqueeze(0), Bm.Transpose(1, 2).Contiguous().Transpose(1, 2).Narrow(0, 0, 1)), refMatMul(w.T().Contiguous().Float64s(), b.Narrow(0, 0, 1).Contiguous().Float64s(), 1, N, K, N, true)[:N*N])
			check("scaled", tensor.MatMulScaled(A, W, 1), wantShared)
		})
	}
}

func TestReductionsAndBroadcasting(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, seq(24), 2, 3, 4)
		require.Equal(t, []float64{276}, tensor.Sum(x, false).Float64s())
		s := tensor.Sum(x, true, 1)
		require.Equal(t, []int{2, 1, 4}, s.Shape())
		require.Equal(t, []float64{12, 15, 18, 21, 48, 51, 54, 57}, s.Float64s())
		m := tensor.Mean(x, false, 0, 2)
		require.Equal(t, []float64{7.5, 11.5, 15.5}, m.Float64s())
		mx := tensor.Max(x, false, -1)
		require.Equal(t, []float64{3, 7, 11, 15, 19, 23}, mx.Float64s())
		st := tensor.SumTo(x, []int{3, 1})
		require.Equal(t, []float64{60, 92, 124}, st.Float64s())
		b := tensor.Add(x, tensor.FromFloat64s(cpu, []float64{100, 200, 300}, 3, 1))
		require.Equal(t, 100.0, b.Float64s()[0])
		require.Equal(t, 204.0, b.Float64s()[4])
		require.InDelta(t, 4324.0, tensor.SumSquares(x), 1e-9)
	})
}

func TestCastsRoundTrip(t *testing.T) {
	tensor.WithScope(func() {
		v := []float64{0, 1, -2.5, 65504, 1e-3, 3.140625}
		x := tensor.FromFloat64s(cpu, v)
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
			got := x.To(dt).Float64s()
			for i := range v {
				tol := 1e-3 * math.Abs(v[i])
				if dt == tensor.BFloat16 {
					tol = 8e-3 * math.Abs(v[i])
				}
				require.InDelta(t, v[i], got[i], tol, "%v %v", dt, v[i])
			}
		}
		ids := tensor.FromFloat64s(cpu, []float64{3, 7}).To(tensor.Int32)
		require.Equal(t, []int32{3, 7}, ids.Int32s())
	})
}

func TestSafetensorsRoundTrip(t *testing.T) {
	tensor.WithScope(func() {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		a := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
		h := a.To(tensor.BFloat16)
		ids := tensor.FromInt32s(cpu, []int32{4, 5})
		require.NoError(t, tensor.WriteSafetensors(path, map[string]*tensor.Tensor{"a": a, "h": h, "ids": ids}, map[string]string{"k": "v"}))
		got, meta, err := tensor.ReadSafetensors(path, cpu)
		require.NoError(t, err)
		require.Equal(t, "v", meta["k"])
		require.Equal(t, a.Float32s(), got["a"].Float32s())
		require.Equal(t, tensor.BFloat16, got["h"].DType())
		require.Equal(t, []int32{4, 5}, got["ids"].Int32s())
		_, _, err = tensor.ReadSafetensors(filepath.Join(t.TempDir(), "none"), cpu)
		require.Error(t, err)
	})
}

// LayerNormBackward reads a strided weight as its values, not its storage.
func TestLayerNormBackwardStridedWeight(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, []float64{0.5, -1, 2, 3, 0.25, -0.75}, 2, 3)
		dy := tensor.FromFloat64s(cpu, []float64{1, -2, 0.5, 0.3, 0.7, -1.1}, 2, 3)
		base := tensor.FromFloat64s(cpu, []float64{1.5, 9, -0.5, 9, 2, 9}, 3, 2)
		strided := base.Narrow(1, 0, 1).Squeeze(1) // 1.5, -0.5, 2 with stride 2
		require.False(t, strided.IsContiguous())
		_, mean, rstd := tensor.LayerNorm(x, nil, nil, 1e-5)
		dx1, dw1, db1 := tensor.LayerNormBackward(dy, x, mean, rstd, strided, true)
		dx2, dw2, db2 := tensor.LayerNormBackward(dy, x, mean, rstd, strided.Clone(), true)
		require.Equal(t, dx2.Float64s(), dx1.Float64s())
		require.Equal(t, dw2.Float64s(), dw1.Float64s())
		require.Equal(t, db2.Float64s(), db1.Float64s())
	})
}

// A max over an empty axis fails before it allocates: outside any scope,
// nothing is left behind.
func TestMaxOverEmptyAxisLeavesNothing(t *testing.T) {
	x := tensor.Zeros(cpu, tensor.Float32, 3, 0, 2)
	defer x.Release()
	xt := x.Transpose(0, 2) // strided: reduce would copy it first
	defer xt.Release()
	mem := cpu.Memory()
	before := mem.InUse()
	for _, in := range []*tensor.Tensor{x, xt} {
		err := tensor.Try(func() { tensor.Max(in, false, 1) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "empty axis")
	}
	require.Equal(t, before, mem.InUse())
}

// SumSquaresAll is the sum of the tensors' SumSquares, and refuses
// tensors of two devices or an integer tensor by name.
func TestSumSquaresAll(t *testing.T) {
	tensor.WithScope(func() {
		rng := rand.New(rand.NewPCG(5, 6))
		a := tensor.RandN(cpu, tensor.Float32, rng, 1, 300, 7)
		b := tensor.RandN(cpu, tensor.Float64, rng, 1, 1001)
		want := tensor.SumSquares(a) + tensor.SumSquares(b) + tensor.SumSquares(a.T())
		require.InDelta(t, want, tensor.SumSquaresAll([]*tensor.Tensor{a, b, a.T()}), 1e-9*want)
		require.Zero(t, tensor.SumSquaresAll(nil))
		err := tensor.Try(func() { tensor.SumSquaresAll([]*tensor.Tensor{a, tensor.FromInt32s(cpu, []int32{1}, 1)}) })
		require.ErrorIs(t, err, tensor.ErrDType)
		require.ErrorContains(t, err, "SumSquaresAll")
	})
}

// TestEmptyViewIsContiguous: a view without elements is contiguous
// whatever its strides, as in PyTorch, so in-place ops take it (a
// zero-length Narrow of a matrix's columns was refused as strided).
func TestEmptyViewIsContiguous(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, seq(6), 2, 3)
		e := x.Narrow(1, 0, 0) // (2, 0), strides (3, 1)
		require.True(t, e.IsContiguous())
		require.NoError(t, tensor.Try(func() {
			e.Fill(7)
			e.CopyFrom(tensor.Zeros(cpu, tensor.Float64, 2, 0))
		}))
		require.Equal(t, seq(6), x.Float64s(), "nothing written")
		require.False(t, x.Narrow(1, 0, 2).IsContiguous())
	})
}

// TestEmptyViewPastTheEnd: an empty Narrow whose start lies past the end
// of its storage (the last rows of a matrix's last columns, x[:, 4:][3:]
// in PyTorch) is an empty tensor like any other: ops on it give empty
// results, as PyTorch's, where they died with Go's "slice bounds out of
// range" on the view's offset.
func TestEmptyViewPastTheEnd(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat32s(cpu, make([]float32, 18), 3, 6)
		e := x.Narrow(1, 4, 2).Narrow(0, 3, 0) // (0, 2), would start at element 22 of 18
		require.Equal(t, []int{0, 2}, e.Shape())
		require.NoError(t, tensor.Try(func() {
			require.Empty(t, e.Float32s())
			require.Equal(t, []float32{0, 0}, tensor.Sum(e, false, 0).Float32s())
			require.Equal(t, []int{0, 2}, tensor.Softmax(e).Shape())
			require.Equal(t, []int{0, 2}, tensor.Exp(e).Shape())
			require.Equal(t, []int{0, 2}, e.To(tensor.Float64).Shape())
			require.Zero(t, tensor.SumSquares(e))
			e.Fill(1)
			e.ScaleInPlace(2)
			e.CopyFrom(tensor.Zeros(cpu, tensor.Float32, 0, 2))
		}))
		require.Equal(t, make([]float32, 18), x.Float32s(), "nothing written")
	})
}
