package tensor_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/tensor"
)

var allDTypes = []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16, tensor.Int32}

// castProbe holds float32 values that exercise every rounding path of the
// casts: ties, subnormals of each half type, overflow, signed zeros,
// infinities, NaNs with payloads, and values beyond the int32 range.
func castProbe() []float32 {
	v := []float32{
		0, float32(math.Copysign(0, -1)), 1, -1, 0.1, -2.5, 3.5, 65504, 65520, 65519.99, 1e5, -1e5,
		5.96e-8, 2.98e-8, 2.99e-8, 6.1e-5, 1e-40, -1e-45, 3.4e38, -3.4e38, 1.00048828125, 1.0009765625,
		2147483520, -2147483648, 3e9, -3e9, 0.499999, 1.5, -0.5, 255.5, 1e-3,
		float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00001), math.Float32frombits(0x7f800001),
		math.Float32frombits(0x7fa5a5a5), math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000),
		math.Float32frombits(0x387fc000), math.Float32frombits(0x33000001),
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		v = append(v, math.Float32frombits(r.Uint32()))
	}
	return v
}

// testCastsBitExact converts the probe values from every dtype to every
// dtype on each device and requires the CPU's bytes exactly (NaN
// payloads included).
func testCastsBitExact(t *testing.T) {
	probe := castProbe()
	want := map[[2]tensor.DType][]byte{}
	cpu := tensor.CPU()
	tensor.WithScope(func() {
		src := tensor.FromFloat32s(cpu, probe)
		for _, from := range allDTypes {
			x := src.To(from)
			for _, to := range allDTypes {
				want[[2]tensor.DType{from, to}] = x.To(to).RawBytes()
			}
		}
	})
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			src := tensor.FromFloat32s(dev, probe)
			for _, from := range allDTypes {
				// The source is built on the CPU and moved, so every cast is
				// tested from identical bits.
				x, err := tensor.FromBytes(dev, from, want[[2]tensor.DType{tensor.Float32, from}], len(probe))
				require.NoError(t, err)
				for _, to := range allDTypes {
					require.Equal(t, want[[2]tensor.DType{from, to}], x.To(to).RawBytes(), "%v -> %v on %v", from, to, dev)
				}
			}
			require.Equal(t, want[[2]tensor.DType{tensor.Float32, tensor.Float16}], src.To(tensor.Float16).RawBytes())
		})
	})
}

// testCopiesBetweenDevices moves every dtype to the device and back, and
// converts while copying with CopyFrom.
func testCopiesBetweenDevices(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			probe := tensor.FromFloat32s(tensor.CPU(), castProbe())
			for _, dt := range allDTypes {
				host := probe.To(dt)
				on := host.ToDevice(dev)
				require.Equal(t, dev, on.Device())
				require.Equal(t, host.RawBytes(), on.RawBytes(), "%v", dt)
				back := on.ToDevice(tensor.CPU())
				require.Equal(t, host.RawBytes(), back.RawBytes(), "%v", dt)
			}
			x := tensor.FromFloat64s(tensor.CPU(), []float64{1.5, -2.25, 3, 1e10}, 2, 2)
			y := tensor.Zeros(dev, tensor.Float32, 2, 2)
			y.CopyFrom(x.T())
			require.Equal(t, []float32{1.5, 3, -2.25, 1e10}, y.Float32s())
			y.CopyFrom(x)
			require.Equal(t, []float32{1.5, -2.25, 3, 1e10}, y.Float32s())
			// Strided copies move raw 2-, 4- and 8-byte words: every dtype.
			for _, dt := range allDTypes {
				host := probe.Narrow(0, 0, 120).To(dt).Reshape(2, 3, 4, 5)
				on := host.ToDevice(dev)
				for _, v := range []*tensor.Tensor{on.Permute(0, 2, 1, 3), on.Permute(3, 1, 0, 2), on.Transpose(-2, -1), on.Alias().Narrow(3, 1, 3)} {
					require.Equal(t, v.ToDevice(tensor.CPU()).RawBytes(), v.Clone().RawBytes(), "%v", dt)
				}
				require.Equal(t, host.Permute(3, 1, 0, 2).Clone().RawBytes(), on.Permute(3, 1, 0, 2).Clone().RawBytes(), "%v", dt)
			}
			f := tensor.FromFloat32s(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
			path := filepath.Join(t.TempDir(), "x.safetensors")
			require.NoError(t, tensor.WriteSafetensors(path, map[string]*tensor.Tensor{"f": f, "h": f.To(tensor.BFloat16)}, nil))
			read, _, err := tensor.ReadSafetensors(path, dev)
			require.NoError(t, err)
			require.Equal(t, dev, read["h"].Device())
			require.Equal(t, f.To(tensor.BFloat16).RawBytes(), read["h"].RawBytes())
			require.Equal(t, f.Float32s(), read["f"].Float32s())
			for _, r := range read {
				r.Release()
			}

			z, err := tensor.FromBytes(dev, tensor.Int32, []byte{1, 0, 0, 0, 255, 255, 255, 255}, 2)
			require.NoError(t, err)
			require.Equal(t, []int32{1, -1}, z.Int32s())
			require.InDelta(t, 3.0, tensor.Scalar(dev, tensor.Float32, 3).Item(), 0)
		})
	})
}

// testBadIndicesAreErrors: ids and targets out of range are errors naming
// the position and the value. On CUDA the kernel reports them through the
// status block and the error surfaces at the next synchronization (here:
// reading the result); afterwards the device works normally.
func testBadIndicesAreErrors(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		table := tensor.Ones(dev, tensor.Float32, 10, 3)
		defer table.Release()
		err := tensor.Try(func() {
			tensor.WithScope(func() {
				_ = tensor.Embedding(table, tensor.FromInt32s(dev, []int32{1, 2, 10, 3}, 4)).Float32s()
			})
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "ids[2] = 10")
		requireOpError(t, err, "Embedding")

		err = tensor.Try(func() {
			tensor.WithScope(func() {
				ids := tensor.FromInt32s(dev, []int32{0, -4}, 2)
				_ = tensor.EmbeddingBackward(ids, tensor.Ones(dev, tensor.Float32, 2, 3), 10).Float32s()
			})
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "ids[1] = -4")
		requireOpError(t, err, "EmbeddingBackward")

		err = tensor.Try(func() {
			tensor.WithScope(func() {
				_, _ = tensor.CrossEntropy(tensor.Zeros(dev, tensor.Float32, 3, 5), tensor.FromInt32s(dev, []int32{0, 5, -100}, 3), -100)
			})
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "row 1 is 5")

		// The device is usable again, and clean.
		require.NoError(t, dev.Synchronize())
		tensor.WithScope(func() {
			out := tensor.Embedding(table, tensor.FromInt32s(dev, []int32{9, 0}, 2))
			require.Equal(t, []float32{1, 1, 1, 1, 1, 1}, out.Float32s())
		})
	})
}

// TestCUDABadIndexReportedAtSync checks the CUDA-specific timing: the
// embedding call itself returns, Synchronize reports the first bad id,
// and a second Synchronize is clean.
func TestCUDABadIndexReportedAtSync(t *testing.T) {
	dev := cudaOrSkip(t)
	tensor.WithScope(func() {
		table := tensor.Ones(dev, tensor.Float64, 4, 2)
		_ = tensor.Embedding(table, tensor.FromInt32s(dev, []int32{0, 7, 8}, 3))
		err := dev.Synchronize()
		require.ErrorIs(t, err, tensor.ErrArgument)
		requireOpError(t, err, "Embedding")
		require.Contains(t, err.Error(), "reported at the next synchronization")
		require.NoError(t, dev.Synchronize())

		// A bad target in the backward (the CPU panics at once).
		logits := tensor.Zeros(dev, tensor.Float32, 2, 3)
		_ = tensor.CrossEntropyBackward(logits, tensor.FromInt32s(dev, []int32{1, 3}, 2), tensor.Ones(dev, tensor.Float32, 2), -100)
		err = dev.Synchronize()
		requireOpError(t, err, "CrossEntropyBackward")
		require.ErrorContains(t, err, "row 1 is 3")
	})
}

func requireOpError(t *testing.T, err error, op string) {
	t.Helper()
	var oe *tensor.OpError
	require.True(t, errors.As(err, &oe), "%v is not an *OpError", err)
	for errors.As(oe.Err, &oe) {
	}
	require.Equal(t, op, oe.Op, "%v", err)
}

// testUnsupportedDTypesAreErrors: arithmetic on half types must be cast
// first, on every device.
func testUnsupportedDTypesAreErrors(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		err := tensor.Try(func() {
			tensor.WithScope(func() { _ = tensor.Exp(tensor.Ones(dev, tensor.Float16, 3)) })
		})
		require.ErrorIs(t, err, tensor.ErrDType)
		require.ErrorContains(t, err, "float16")
	})
}

// TestCUDADeviceIdentity: naming, lookup, and the error for a missing
// device (which runs everywhere: without a GPU, every CUDA call fails the
// same way).
func TestCUDADeviceIdentity(t *testing.T) {
	_, err := tensor.CUDA(1 << 20)
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.True(t, strings.HasPrefix(err.Error(), "tensor: cuda:1048576"), err.Error())
	if gpu0, err := tensor.CUDA(0); err != nil {
		require.ErrorIs(t, err, tensor.ErrDevice)
		require.True(t, errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice), "the cause is kept: %v", err)
		d, err := tensor.ParseDevice("auto")
		require.NoError(t, err)
		require.Equal(t, tensor.CPU(), d)
	} else {
		require.Equal(t, "cuda:0", gpu0.String())
		require.Equal(t, tensor.KindCUDA, gpu0.Kind())
		require.NotNil(t, gpu0.Memory())
		for _, name := range []string{"cuda", "cuda:0", "gpu", "auto"} {
			d, err := tensor.ParseDevice(name)
			require.NoError(t, err)
			require.Equal(t, gpu0, d, name)
		}
	}
}
