package tensor_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// The fuzz targets of the tensor package. Run one with, for example,
//
//	go test ./tensor -run '^$' -fuzz FuzzOpArguments -fuzztime 5m
//
// Without -fuzz, go test runs their seed corpora as ordinary tests.

// fuzzBytes reads a fuzz input a byte at a time (0 once it runs out).
type fuzzBytes struct {
	b []byte
	i int
}

func (r *fuzzBytes) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

func (r *fuzzBytes) more() bool { return r.i < len(r.b) }

// small returns a number in [lo, hi].
func (r *fuzzBytes) small(lo, hi int) int { return lo + r.next()%(hi-lo+1) }

// shape returns a shape of rank 0 to 4 with dimensions 0 to 5, and now and
// then -1 (Reshape's inferred dimension) or a negative one.
func (r *fuzzBytes) shape() []int {
	s := make([]int, r.small(0, 4))
	for i := range s {
		switch v := r.next(); {
		case v == 255:
			s[i] = -2
		case v == 254:
			s[i] = -1
		default:
			s[i] = v % 6
		}
	}
	return s
}

func (r *fuzzBytes) float() float64 {
	switch v := r.next(); v {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return -0.5
	default:
		return float64(v) / 64
	}
}

// FuzzOpArguments drives the tensor ops with random shapes, dtypes (an
// unknown one too), views (transposes, narrows, expands, permutations),
// devices (two CPU devices with managers of their own), contexts and
// released tensors: every call must return a result or panic with an
// *OpError (what Try turns into an error), never anything else, and a
// failed op must leak nothing: when the program's scope closes, its
// context holds no bytes and both managers are back where they were.
func FuzzOpArguments(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 2, 3, 3, 1, 0, 2, 3, 3, 5, 0, 1, 9, 1, 10, 2},
		{1, 3, 2, 3, 4, 0, 3, 4, 3, 2, 7, 0, 1, 7, 1, 0, 3, 8, 1, 2},
		{4, 2, 5, 5, 2, 1, 1, 5, 12, 0, 0, 14, 1, 1, 20, 0, 0},
		{0, 4, 1, 2, 3, 4, 0, 4, 1, 2, 3, 4, 6, 0, 1, 16, 0, 2, 21, 1, 0, 22, 0},
		{2, 2, 3, 4, 3, 1, 4, 1, 18, 0, 1, 23, 0, 1, 24, 0, 1, 25, 2, 0, 26, 0},
		{0, 3, 2, 2, 4, 0, 3, 2, 2, 4, 28, 0, 1, 27, 0, 1, 2, 3, 29, 0, 30, 1},
	} {
		f.Add(seed)
	}
	devs := []tensor.Device{tensor.NewCPUDevice(memory.NewHostManager(memory.Config{})), tensor.NewCPUDevice(memory.NewHostManager(memory.Config{}))}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzBytes{b: data}
		base := [2]int64{devs[0].Memory().InUse(), devs[1].Memory().InUse()}
		ctxs := []*tensor.Ctx{tensor.NewCtx(), tensor.NewCtx()}
		ctxs[0].WithScope(func() {
			ctxs[1].WithScope(func() { fuzzProgram(t, r, devs, ctxs) })
		})
		for i, c := range ctxs {
			if n := c.BytesInUse(); n != 0 {
				t.Fatalf("context %d holds %d bytes after its scope closed (input %v)", i, n, data)
			}
		}
		for i, d := range devs {
			if n := d.Memory().InUse(); n != base[i] {
				t.Fatalf("device %d: %d bytes in use, %d before (input %v)", i, n, base[i], data)
			}
		}
	})
}

// fuzzProgram runs ops on a pool of tensors as r says.
func fuzzProgram(t *testing.T, r *fuzzBytes, devs []tensor.Device, ctxs []*tensor.Ctx) {
	var pool []*tensor.Tensor
	pick := func() *tensor.Tensor {
		if len(pool) == 0 {
			return nil
		}
		return pool[r.next()%len(pool)]
	}
	try := func(fn func()) {
		err := tensor.Try(fn) // any panic other than an *OpError fails the fuzz run
		var oe *tensor.OpError
		if err != nil && !errors.As(err, &oe) {
			t.Fatalf("Try returned a %T: %v", err, err)
		}
	}
	add := func(ts ...*tensor.Tensor) {
		for _, x := range ts {
			if x != nil && len(pool) < 12 {
				pool = append(pool, x)
			}
		}
	}
	// Two tensors to start with.
	for range 2 {
		dt := tensor.DType(r.small(0, 5)) // 5: not a dtype
		dev, c := devs[r.next()%2], ctxs[r.next()%2]
		shape := r.shape()
		try(func() {
			n := 1
			for _, d := range shape {
				n *= max(d, 0)
			}
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = float64(i%7) - 3
			}
			if dt == tensor.Int32 {
				ids := make([]int32, n)
				for i := range ids {
					ids[i] = int32(i % 5)
				}
				add(c.FromInt32s(dev, ids, shape...))
				return
			}
			add(c.FromFloats(dev, dt, vals, shape...))
		})
	}
	for steps := 0; r.more() && steps < 64; steps++ {
		op := r.next() % 32
		a, b := pick(), pick()
		if a == nil {
			return
		}
		try(func() {
			switch op {
			case 0:
				add(tensor.Binary(tensor.BinaryOp(r.small(0, 7)), a, b))
			case 1:
				add(tensor.Unary(tensor.UnaryOp(r.small(0, 14)), a))
			case 2:
				add(tensor.MatMulWith(a, b, r.float(), tensor.MatMulMode{Float32Out: r.next()%2 == 0, TF32: r.next()%2 == 0}))
			case 3:
				add(a.Reshape(r.shape()...))
			case 4:
				add(a.Transpose(r.small(-3, 4), r.small(-3, 4)))
			case 5:
				perm := make([]int, r.small(0, 4))
				for i := range perm {
					perm[i] = r.small(-1, 4)
				}
				add(a.Permute(perm...))
			case 6:
				add(a.Narrow(r.small(-2, 4), r.small(-1, 5), r.small(-1, 5)))
			case 7:
				add(a.Expand(r.shape()...))
			case 8:
				add(a.Squeeze(r.small(-3, 4)), a.Unsqueeze(r.small(-3, 5)))
			case 9:
				axes := make([]int, r.small(0, 3))
				for i := range axes {
					axes[i] = r.small(-3, 4)
				}
				keep := r.next()%2 == 0
				switch r.next() % 3 {
				case 0:
					add(tensor.Sum(a, keep, axes...))
				case 1:
					add(tensor.Mean(a, keep, axes...))
				default:
					add(tensor.Max(a, keep, axes...))
				}
			case 10:
				add(tensor.Softmax(a), tensor.LogSoftmax(a))
			case 11:
				add(tensor.CausalSoftmax(a))
			case 12:
				add(tensor.Concat(r.small(-2, 4), a, b))
			case 13:
				add(a.Split(r.small(-1, 4), r.small(-2, 4))...)
			case 14:
				add(a.To(tensor.DType(r.small(0, 5))))
			case 15:
				add(a.Contiguous(), a.Clone())
			case 16:
				a.CopyFrom(b)
			case 17:
				a.AddInPlace(b)
			case 18:
				a.ScaleInPlace(r.float())
				a.Fill(r.float())
			case 19:
				add(tensor.Embedding(a, b))
			case 20:
				l, _ := tensor.CrossEntropy(a, b, int32(r.small(-1, 3)))
				add(l)
			case 21:
				y, mean, rstd := tensor.LayerNorm(a, b, pick(), r.float())
				add(y, mean, rstd)
			case 22:
				add(tensor.Dropout(a, r.float(), uint64(r.next()), uint64(r.next())))
			case 23:
				add(tensor.Affine(a, r.float(), r.float()))
			case 24:
				add(tensor.SumTo(a, r.shape()))
			case 25:
				a.WriteNarrow(r.small(-1, 4), r.small(-1, 4), b)
			case 26:
				if r.next()%4 == 0 { // use after release: ErrReleased from then on
					a.Release()
				}
			case 27:
				a.Item()
				a.Float32s()
				a.Int32s()
			case 28:
				add(tensor.CausalMask(a, r.float()))
			case 29:
				add(a.ToDevice(devs[r.next()%2]))
			case 30:
				out, lse := tensor.FusedCausalAttention(a, b, pick(), r.float(), 1, 2)
				add(out, lse)
			case 31:
				add(tensor.EmbeddingBackward(a, b, r.small(-1, 6)))
			}
		})
	}
}

// FuzzReadSafetensors mutates valid safetensors files (header and data):
// reading one must give tensors that match the header or an error, never
// a panic, and leave nothing allocated.
func FuzzReadSafetensors(f *testing.F) {
	dir := f.TempDir()
	c := tensor.NewCtx()
	c.WithScope(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		path := filepath.Join(dir, "seed.safetensors")
		err := tensor.WriteSafetensors(path, map[string]*tensor.Tensor{
			"a":   c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 3),
			"h":   c.RandN(tensor.CPU(), tensor.Float16, rng, 1, 4),
			"ids": c.FromInt32s(tensor.CPU(), []int32{1, 2, 3}, 3),
		}, map[string]string{"k": "v"})
		if err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(b[:9])
	})
	f.Add([]byte(`{"__metadata__":{}}`))
	dev := tensor.NewCPUDevice(memory.NewHostManager(memory.Config{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.safetensors")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		base := dev.Memory().InUse()
		c := tensor.NewCtx()
		c.WithScope(func() {
			ts, _, err := c.ReadSafetensors(path, dev)
			if err != nil {
				return
			}
			for name, x := range ts {
				if int64(len(x.RawBytes())) != x.Bytes() {
					t.Fatalf("%q: %d bytes for %v %v", name, len(x.RawBytes()), x.DType(), x.Shape())
				}
			}
		})
		_, _ = tensor.ReadSafetensorsMetadata(path)
		if c.BytesInUse() != 0 || dev.Memory().InUse() != base {
			t.Fatalf("reading left %d bytes in its context, %d in the manager", c.BytesInUse(), dev.Memory().InUse()-base)
		}
	})
}
