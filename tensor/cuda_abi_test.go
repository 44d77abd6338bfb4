package tensor

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// These tests check the Go launchers against the compiled kernels without
// a GPU: every launch the CUDA backend makes is recorded by a fake queue
// and compared with the parameter table nvcc wrote into the fatbin's
// cubins (.nv.info sections: the number of parameters, their total size,
// the launch bound of each kernel).

// kernelABI is what the fatbin says about one kernel.
type kernelABI struct {
	params     int // EIATTR_KPARAM_INFO entries
	paramBytes int // EIATTR_CBANK_PARAM_SIZE
	maxThreads int // EIATTR_MAX_THREADS (x*y*z), 0 when not recorded
}

// .nv.info attribute and format codes.
const (
	eifmtNVal, eifmtBVal, eifmtHVal, eifmtSVal = 1, 2, 3, 4
	eiattrMaxThreads, eiattrKParamInfo         = 0x05, 0x17
	eiattrCBankParamSize                       = 0x19
)

// fatbinCubins returns the uncompressed ELF cubins of an nvcc fatbin and
// the number of compressed ones it skipped (nvcc 11.8, which built the
// committed fatbin, compresses only PTX; newer ones may compress SASS).
func fatbinCubins(b []byte) (cubins [][]byte, compressed int, err error) {
	for len(b) >= 16 && binary.LittleEndian.Uint32(b) == fatbinMagic {
		hsz, fsz := int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint64(b[8:]))
		if hsz+fsz > len(b) {
			return nil, 0, fmt.Errorf("fatbin of %d bytes claims %d", len(b), hsz+fsz)
		}
		entries := b[hsz : hsz+fsz]
		for len(entries) >= 16 {
			kind := binary.LittleEndian.Uint16(entries)
			ehsz := int(binary.LittleEndian.Uint32(entries[4:]))
			size := int(binary.LittleEndian.Uint64(entries[8:]))
			if ehsz+size > len(entries) {
				return nil, 0, fmt.Errorf("fatbin entry of %d bytes overruns its container", ehsz+size)
			}
			payload := entries[ehsz : ehsz+size]
			switch {
			case kind == 2 && bytes.HasPrefix(payload, []byte("\x7fELF")):
				cubins = append(cubins, payload)
			case kind == 2:
				compressed++
			}
			entries = entries[ehsz+size:]
		}
		b = b[hsz+fsz:]
	}
	return cubins, compressed, nil
}

// cubinABI reads every kernel's parameter table from a cubin.
func cubinABI(cubin []byte) (map[string]kernelABI, error) {
	// Cubins keep the CUDA API version in e_version, which debug/elf
	// refuses: read a copy with the standard value.
	c := bytes.Clone(cubin)
	if len(c) < 24 {
		return nil, fmt.Errorf("cubin of %d bytes", len(c))
	}
	binary.LittleEndian.PutUint32(c[20:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(c))
	if err != nil {
		return nil, err
	}
	out := map[string]kernelABI{}
	for _, s := range f.Sections {
		name, ok := strings.CutPrefix(s.Name, ".nv.info.")
		if !ok {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return nil, err
		}
		var k kernelABI
		for len(data) >= 2 {
			format, attr := data[0], data[1]
			var val []byte
			switch format {
			case eifmtNVal, eifmtBVal, eifmtHVal: // 4-byte records; the value, if any, in the last two
				val, data = data[2:4], data[4:]
			case eifmtSVal:
				n := int(binary.LittleEndian.Uint16(data[2:]))
				val, data = data[4:4+n], data[4+n:]
			default:
				return nil, fmt.Errorf("%s: unknown .nv.info format %#x", s.Name, format)
			}
			switch attr {
			case eiattrKParamInfo:
				k.params++
			case eiattrCBankParamSize:
				k.paramBytes = int(binary.LittleEndian.Uint16(val))
			case eiattrMaxThreads:
				k.maxThreads = int(binary.LittleEndian.Uint32(val)) * int(binary.LittleEndian.Uint32(val[4:])) * int(binary.LittleEndian.Uint32(val[8:]))
			}
		}
		out[name] = k
	}
	return out, nil
}

// embeddedABI merges the tables of every cubin, requiring them to agree.
func embeddedABI(t *testing.T) map[string]kernelABI {
	cubins, compressed, err := fatbinCubins(kernelsFatbin)
	require.NoError(t, err)
	if len(cubins) == 0 && compressed > 0 {
		t.Skipf("the fatbin's %d cubins are compressed; build it with nvcc -Xfatbin=-compress=false to check the launchers' ABI", compressed)
	}
	require.NotEmpty(t, cubins, "the fatbin holds no cubin")
	all := map[string]kernelABI{}
	for _, c := range cubins {
		abi, err := cubinABI(c)
		require.NoError(t, err)
		for name, k := range abi {
			if old, ok := all[name]; ok {
				require.Equal(t, old, k, "kernel %s differs between architectures", name)
			}
			all[name] = k
		}
	}
	return all
}

func TestFatbinHasEveryKernel(t *testing.T) {
	abi := embeddedABI(t)
	var k cudaKernels
	for name := range k.bindings() {
		require.Contains(t, abi, name, "the Go side binds %s, which the fatbin lacks", name)
	}
	// count_targets(Status*, const int*, i64, int), __launch_bounds__(1024):
	// a known answer for the parser.
	require.Equal(t, kernelABI{params: 4, paramBytes: 28, maxThreads: 1024}, abi["count_targets"])
}

// recordingQueue stands in for the stream: it records launches.
type recordingQueue struct {
	launches []launchRecord
	copies   int
}

type launchRecord struct {
	fn          *cuda.Function
	grid, block [3]uint32
	args, bytes int
}

func (q *recordingQueue) launch(fn *cuda.Function, grid, block [3]uint32, a *cuda.Args) error {
	if err := a.Err(); err != nil {
		return err
	}
	var n, size int
	if _, err := fmt.Sscanf(a.String(), "%d kernel arguments, %d bytes", &n, &size); err != nil {
		return err
	}
	q.launches = append(q.launches, launchRecord{fn, grid, block, n, size})
	return nil
}
func (q *recordingQueue) copyDtoD(dst, src cuda.DevicePtr, n int) error { q.copies++; return nil }
func (q *recordingQueue) copyHtoD(cuda.DevicePtr, []byte) error         { q.copies++; return nil }
func (q *recordingQueue) copyDtoH([]byte, cuda.DevicePtr) error         { q.copies++; return nil }
func (q *recordingQueue) clearWord(cuda.DevicePtr) error                { return nil }
func (q *recordingQueue) sync() error                                   { return nil }

// fakeCUDADevice is a cudaDevice whose memory is address ranges with
// nothing behind them and whose queue records.
func fakeCUDADevice(t *testing.T) (*cudaDevice, *recordingQueue, map[*cuda.Function]string) {
	k := &cudaKernels{}
	names := map[*cuda.Function]string{}
	for name, slot := range k.bindings() {
		fn := &cuda.Function{}
		*slot, names[fn] = fn, name
	}
	mem, err := memory.NewManager([]memory.Backend{memtest.NewAddressBackend(memory.TierDevice, 1<<40)},
		memory.Config{Policy: memory.SingleTierPolicy(memory.TierDevice)})
	require.NoError(t, err)
	args, err := cuda.NewArgs()
	require.NoError(t, err)
	t.Cleanup(args.Free)
	q := &recordingQueue{}
	d := &cudaDevice{name: "cuda:fake", k: k, mem: mem, q: q, args: args,
		status: &cudaStatus{words: new(cudaStatusWords), dev: 1 << 30, claim: 2 << 30}}
	return d, q, names
}

// TestCUDALaunchersMatchKernels drives every backend primitive of a fake
// device through each of its launch variants and checks each launch:
// the kernel exists, gets as many argument bytes as it declares, and its
// block fits its launch bound and the grid the hardware limits.
func TestCUDALaunchersMatchKernels(t *testing.T) {
	abi := embeddedABI(t)
	d, q, names := fakeCUDADevice(t)
	b := cudaBackend{d}
	used := map[string]bool{}
	before := d.mem.InUse()
	WithScope(func() {
		for _, dt := range []DType{Float32, Float64} {
			driveBackend(t, d, b, dt)
		}
		{ // half gradients: their sum of squares (one and several chunks) and AdamW reading them
			hb, hf := mustNew("t", nil, d, BFloat16, []int{4, 6}), mustNew("t", nil, d, Float16, []int{3, 70001})
			b.sumSquares([]*Tensor{hb})
			b.sumSquares([]*Tensor{hb, hf, mustNew("t", nil, d, Float32, []int{5})})
			p := []*Tensor{mustNew("t", nil, d, Float32, []int{4, 6}), mustNew("t", nil, d, Float32, []int{3, 70001})}
			b.adamwMulti(p, []*Tensor{hb, hf}, p, p, []float64{0, 0.1}, 1e-3, 0.9, 0.99, 1e-8, 2)
		}
		b.unscaleCheck([]*Tensor{mustNew("t", nil, d, Float32, []int{4, 6}), mustNew("t", nil, d, Float32, []int{5})}, 0.5)
		b.scaleAll([]*Tensor{mustNew("t", nil, d, Float32, []int{4, 6}), mustNew("t", nil, d, Float32, []int{5})}, 0.5)
		driveAttention(t, d, b)
		for _, from := range []DType{Float32, Float64, Float16, BFloat16, Int32} {
			src := mustNew("t", nil, d, from, []int{7})
			b.fill(src, 1.5)
			for _, to := range []DType{Float32, Float64, Float16, BFloat16, Int32} {
				b.cast(mustNew("t", nil, d, to, []int{7}), src)
			}
			x := mustNew("t", nil, d, from, []int{5, 6})
			xt := x.T()
			b.copyStrided(mustNew("t", nil, d, from, []int{6, 5}), xt, mergeDims("t", xt.shape, xt.strides))
			p := mustNew("t", nil, d, from, []int{2, 3, 4, 5}).Permute(0, 2, 1, 3)
			b.copyStrided(mustNew("t", nil, d, from, []int{2, 4, 3, 5}), p, mergeDims("t", p.shape, p.strides))
			{ // rows of whole 16-byte words: the wide kernel
				w := mustNew("t", nil, d, from, []int{2, 3, 4, 8}).Permute(0, 2, 1, 3)
				b.copyStrided(mustNew("t", nil, d, from, []int{2, 4, 3, 8}), w, mergeDims("t", w.shape, w.strides))
			}
			b.copy2D(mustNew("t", nil, d, from, []int{4, 9}), mustNew("t", nil, d, from, []int{4, 3}), 4, 3, 9, 2, 3, 0)
			table := mustNew("t", nil, d, from, []int{10, 4})
			require.NoError(t, b.gather(mustNew("t", nil, d, from, []int{3, 4}), table, mustNew("t", nil, d, Int32, []int{3}), 4, 10))
		}
	})
	require.NotEmpty(t, q.launches)
	for _, l := range q.launches {
		name := names[l.fn]
		require.NotEmpty(t, name, "launch of a kernel outside the table")
		used[name] = true
		k, ok := abi[name]
		require.True(t, ok, "%s is not in the fatbin", name)
		require.Equal(t, k.params, l.args, "%s: %d arguments for %d parameters", name, l.args, k.params)
		require.Equal(t, k.paramBytes, l.bytes, "%s: %d argument bytes for %d bytes of parameters", name, l.bytes, k.paramBytes)
		threads := int(l.block[0] * l.block[1] * l.block[2])
		if k.maxThreads > 0 {
			require.LessOrEqual(t, threads, k.maxThreads, "%s: block %v exceeds the launch bound", name, l.block)
		}
		require.LessOrEqual(t, threads, 1024, name)
		for i, g := range l.grid {
			require.GreaterOrEqual(t, g, uint32(1), "%s: grid %v", name, l.grid)
			if i > 0 {
				require.LessOrEqual(t, g, uint32(maxGridYZ), "%s: grid %v", name, l.grid)
			}
		}
	}
	var k cudaKernels
	for name := range k.bindings() {
		if !strings.HasSuffix(name, "_i64") { // 64-bit index variants need more than 2^32 elements
			require.True(t, used[name], "no launcher test reached %s", name)
		}
	}
	require.Equal(t, before, d.mem.InUse(), "tensors and reduction scratch are all returned")
}

// driveBackend calls every float primitive of b in dtype dt, in each
// launch variant (warp and block rows, one and several chunks, contiguous
// and strided operands).
func driveBackend(t *testing.T, d *cudaDevice, b cudaBackend, dt DType) {
	n := func(shape ...int) *Tensor { return mustNew("t", nil, d, dt, shape) }
	ids := func(k int) *Tensor { return mustNew("t", nil, d, Int32, []int{k}) }
	x, y := n(4, 6), n(4, 6)
	for op := range NumUnaryOps { // every op of the table
		b.unary(op, y, x)
		b.unaryBackward(op, y, x, x, x)
	}
	b.affine(y, x, 2, 0)
	b.affine(y, x, 2, 1)
	for op := range NumBinaryOps {
		b.binary(op, y, x, x, mergeDims("t", x.shape, x.strides, x.strides))
	}
	// A bias add: the row-broadcast kernel; a column broadcast: the
	// strided one.
	b.binary(OpAdd, y, x, n(6), mergeDims("t", y.shape, x.strides, []int{0, 1}))
	b.binary(OpAdd, y, x, n(4), mergeDims("t", y.shape, x.strides, []int{1, 0}))

	big, cols := n(3, 70001), n(5000, 97)
	b.reduceSum(n(4), x, 4, 6, 1, false)
	b.reduceSum(n(3), big, 3, 70001, 1, true)
	b.reduceMax(n(3), big, 3, 70001, 1)
	b.reduceSum(n(97), cols, 1, 5000, 97, false)
	b.reduceMax(n(97), cols, 1, 5000, 97)
	b.reduceSum(n(6), x, 1, 4, 6, true)
	b.sumSquares([]*Tensor{x})   // one chunk: the scalar slot directly
	b.sumSquares([]*Tensor{big}) // chunks and their sum
	b.sumSquares([]*Tensor{x, big, n(0), x})

	if dt == Float64 { // float32 products go to cuBLAS
		b.matmul(n(2, 3, 5), n(2, 3, 4), n(4, 5), false, true, 3, 5, 4, 2, 12, 0, 1, 0, false)
	}

	v := n(2, 2000)
	b.softmax(y, x, 4, 6, false)
	b.softmaxBackward(y, x, x, 4, 6, true)
	b.softmax(v, v, 2, 2000, true)
	b.softmaxBackward(v, v, v, 2, 2000, false)
	b.causalMask(y, x, 1, 4, 6, -1)
	b.causalSoftmax(y, x, 1, 4, 6)
	b.causalSoftmaxBackward(y, x, x, 2, 2, 6)
	b.causalSoftmax(v, v, 1, 2, 2000)
	b.causalSoftmaxBackward(v, v, v, 1, 2, 2000)

	mean, rstd, w := n(4), n(4), n(6)
	b.layerNorm(y, mean, rstd, x, w, w, 4, 6, 1e-5)
	b.layerNormBackward(y, w, w, x, x, mean, rstd, w, 4, 6)
	b.layerNormBackward(y, nil, nil, x, x, mean, rstd, nil, 4, 6)
	if dt == Float32 { // the register path: one kernel per words a lane
		for v := 1; v <= lnMaxWords; v++ {
			cols := 128*v - 4
			xr, wr := n(2, cols), n(cols)
			b.layerNormBackward(xr, wr, wr, xr, xr, n(2), n(2), wr, 2, cols)
		}
		b.layerNormBackward(n(2, 8), nil, nil, n(2, 8), n(2, 8), n(2), n(2), nil, 2, 8)
	}

	require.NoError(t, b.scatterAdd(n(10, 6), x, ids(4), 6, 10))
	require.NoError(t, b.scatterAdd(n(10, 6), n(5000, 6), ids(5000), 6, 10)) // sorts across tiles
	_, err := b.crossEntropy(n(4), x, ids(4), 4, 6, 6, -100)
	require.NoError(t, err)
	b.crossEntropyBackward(y, x, ids(4), n(4), 4, 6, 6, -100)
	_, err = b.crossEntropy(n(2), v, ids(2), 2, 2000, 2000, -100)
	require.NoError(t, err)
	b.crossEntropyBackward(v, v, ids(2), n(2), 2, 2000, 2000, -100)
	grads := []DType{dt}
	if dt == Float32 {
		grads = append(grads, Float16, BFloat16)
	}
	for _, g := range grads {
		b.crossEntropyFused(n(4), mustNew("t", nil, d, g, []int{4, 6}), x, ids(4), n(4), 4, 6, 6, -100)
		b.crossEntropyFused(n(2), mustNew("t", nil, d, g, []int{2, 2000}), v, ids(2), n(2), 2, 2000, 2000, -100)
		if g != dt { // half logits, float32 loss: the half head's kernels
			half := func(shape ...int) *Tensor { return mustNew("t", nil, d, g, shape) }
			b.crossEntropyFused(n(4), half(4, 6), half(4, 6), ids(4), n(4), 4, 6, 6, -100)
			b.crossEntropyFused(n(2), half(2, 2000), half(2, 2000), ids(2), n(2), 2, 2000, 2000, -100)
		}
	}
	_, err = b.countTargets(ids(4), 4, -100)
	require.NoError(t, err)
	b.meanDivisor(n(), ids(4), 4, -100)

	b.dropout(y, x, 0.5, 1, 3)
	b.dropout(y, x, 0, 1, 3)
	b.adamw(x, x, x, x, 1e-3, 0.9, 0.99, 1e-8, 0, 1)
	if dt == Float32 {
		b.unaryTo(OpGelu, mustNew("t", nil, d, Float16, []int{4, 6}), x)
		b.unaryTo(OpGelu, mustNew("t", nil, d, BFloat16, []int{4, 6}), x)
		b.unaryBackwardTo(OpGelu, mustNew("t", nil, d, Float16, []int{4, 6}), x, nil, x)
		b.unaryBackwardTo(OpGelu, mustNew("t", nil, d, BFloat16, []int{4, 6}), x, nil, x)
		b.layerNorm(mustNew("t", nil, d, Float16, []int{4, 6}), mean, rstd, x, w, w, 4, 6, 1e-5)
		b.layerNorm(mustNew("t", nil, d, BFloat16, []int{4, 6}), mean, rstd, x, nil, nil, 4, 6, 1e-5)
		for _, h := range []DType{Float16, BFloat16} { // half sources
			hx := mustNew("t", nil, d, h, []int{4, 6})
			b.unaryTo(OpGelu, mustNew("t", nil, d, h, []int{4, 6}), hx)
			b.unaryBackwardTo(OpGelu, mustNew("t", nil, d, h, []int{4, 6}), hx, nil, x)
		}
	}
	b.adamwMulti([]*Tensor{x, big}, []*Tensor{x, big}, []*Tensor{x, big}, []*Tensor{x, big}, []float64{0, 0.1}, 1e-3, 0.9, 0.99, 1e-8, 2)
	// The guarded step (guard.go): its blocks at made-up mapped addresses.
	guard := &StepGuard{dev: d, w: new(stepGuardWords), cu: &cudaMapped{d: d, dev: 3 << 30}}
	args := &AdamWArgs{dev: d, w: new(adamwArgsWords), cu: &cudaMapped{d: d, dev: 4 << 30}}
	b.adamwGuarded([]*Tensor{x, big}, []*Tensor{x, big}, []*Tensor{x, big}, []*Tensor{x, big}, []float64{0, 0.1}, args, guard)
	if dt == Float32 {
		b.clipGuarded(guard, []*Tensor{x, big}, n(1), 1)
		b.clipGuarded(guard, nil, nil, 1)
		b.guardedGrads("UnscaleGrads", d.k.unscaleGuarded, guard, []*Tensor{x, big})
	}
	b.sgd(x, x, x, 0.1, 0.9, 0, true)
}

// An AdamW update counts one access of each parameter, gradient and moment
// (the placement's touches a step), however many table rows a tensor
// spans: counting one a row made large tensors look hot and demoted the
// wrong ones (session 22).
func TestAdamWRowsTouchOnce(t *testing.T) {
	d, _, _ := fakeCUDADevice(t)
	b := cudaBackend{d}
	WithScope(func() {
		n := func(dt DType) *Tensor { return mustNew("t", nil, d, dt, []int{3, 70001}) } // 4 rows
		p, g, m, v := n(Float32), n(BFloat16), n(Float32), n(Float32)
		ts := []*Tensor{p, g, m, v}
		before := make([]int64, len(ts))
		for i, x := range ts {
			before[i] = x.ref.st.alloc.Touches()
		}
		b.adamwMulti([]*Tensor{p}, []*Tensor{g}, []*Tensor{m}, []*Tensor{v}, []float64{0.1}, 1e-3, 0.9, 0.99, 1e-8, 1)
		for i, x := range ts {
			require.Equal(t, before[i]+1, x.ref.st.alloc.Touches(), "tensor %d", i)
		}
	})
}

// A strided copy and the layer norm's backward count one access of each
// operand, as every op does: the alignment checks that pick their
// kernels (16-byte words, the register path) read the addresses through
// devPtr's counting too, and each of those ops counted its operands twice.
func TestCUDAOpsTouchOnce(t *testing.T) {
	d, q, names := fakeCUDADevice(t)
	b := cudaBackend{d}
	touches := func(ts ...*Tensor) []int64 {
		out := make([]int64, len(ts))
		for i, x := range ts {
			out[i] = x.ref.st.alloc.Touches()
		}
		return out
	}
	once := func(what, kernel string, run func(), ts ...*Tensor) {
		t.Helper()
		before := touches(ts...)
		run()
		require.Equal(t, kernel, names[q.launches[len(q.launches)-1].fn], what)
		for i, n := range touches(ts...) {
			require.Equal(t, before[i]+1, n, "%s: operand %d", what, i)
		}
	}
	WithScope(func() {
		n := func(shape ...int) *Tensor { return mustNew("t", nil, d, Float32, shape) }
		for _, c := range []struct {
			shape  []int
			kernel string
		}{{[]int{2, 3, 4, 5}, "copy_strided_b4_i32"}, {[]int{2, 3, 4, 8}, "copy_strided_b16_i32"}} {
			x := n(c.shape...)
			src := x.Permute(0, 2, 1, 3)
			dst := n(src.shape...)
			once("Clone of "+fmt.Sprint(c.shape), c.kernel, func() {
				b.copyStrided(dst, src, mergeDims("t", src.shape, src.strides))
			}, dst, x)
		}
		dx, dy, x, w, mean, rstd := n(2, 124), n(2, 124), n(2, 124), n(124), n(2), n(2)
		once("LayerNormBackward", "layernorm_backward_reg_f32_v1", func() {
			b.layerNormBackward(dx, nil, nil, dy, x, mean, rstd, w, 2, 124)
		}, dx, dy, x, w, mean, rstd)
	})
}
