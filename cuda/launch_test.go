package cuda

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fakeFunction(c *Context) *Function {
	return &Function{mod: &Module{ctx: c, kind: "PTX"}, h: 0, name: "vadd", params: []int{8, 8, 8, 4}}
}

func TestLaunchValidation(t *testing.T) {
	c := fakeContext(t)
	fn := fakeFunction(c)
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	a.Ptr(1).Ptr(2).Ptr(3).Int32(4)
	g, b := [3]uint32{4, 1, 1}, [3]uint32{256, 1, 1}

	cases := []struct {
		grid, block [3]uint32
		shared      int
		want        string
	}{
		{[3]uint32{0, 1, 1}, b, 0, "must be at least 1 on every axis"},
		{g, [3]uint32{256, 0, 1}, 0, "must be at least 1 on every axis"},
		{[3]uint32{1, 70000, 1}, b, 0, "grid y = 70000 exceeds 65535"},
		{g, [3]uint32{2048, 1, 1}, 0, "block x = 2048 exceeds 1024"},
		{g, [3]uint32{64, 64, 1}, 0, "has 4096 threads, cuda:0 allows 1024"},
		{g, [3]uint32{1, 1, 65}, 0, "block z = 65 exceeds 64"},
		{g, b, -1, "-1 bytes of dynamic shared memory"},
		{g, b, 300 << 10, "307200 bytes of dynamic shared memory, cuda:0 allows 0 to 232448"},
	}
	for _, tc := range cases {
		err := c.LaunchKernelArgs(fn, tc.grid, tc.block, tc.shared, nil, a)
		assert.ErrorIs(t, err, ErrInvalidValue)
		assert.ErrorContains(t, err, tc.want)
	}
	assert.ErrorContains(t, c.LaunchKernelArgs(nil, g, b, 0, nil, a), "nil function")
	assert.ErrorContains(t, c.LaunchKernelArgs(fn, g, b, 0, nil, nil), "nil argument list")
	other := &Context{dev: 1, drv: c.drv, props: c.props}
	assert.ErrorContains(t, other.LaunchKernelArgs(fn, g, b, 0, nil, a), "was loaded in cuda:0, not cuda:1")
	a.Reset().Ptr(1)
	assert.ErrorContains(t, c.LaunchKernelArgs(fn, g, b, 0, nil, a), "takes 4 parameters, got 1")
	a.Reset().Add(3)
	assert.ErrorContains(t, c.LaunchKernelArgs(fn, g, b, 0, nil, a), "Go int")
	fn.mod.unloaded = true
	assert.ErrorContains(t, c.LaunchKernelArgs(fn, g, b, 0, nil, a.Reset()), "module was unloaded")
}

// A launch is one driver call and no Go allocation. The fake
// cuLaunchKernel (labs) returns its first argument, the CUfunction: 0.
func TestLaunchCostOneCallNoAllocation(t *testing.T) {
	c := fakeContext(t)
	fn := fakeFunction(c)
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	g, b := [3]uint32{4096, 1, 1}, [3]uint32{256, 1, 1}
	launch := func() {
		a.Reset().Ptr(0x1000).Ptr(0x2000).Ptr(0x3000).Int32(1 << 20)
		if err := c.LaunchKernelArgs(fn, g, b, 0, nil, a); err != nil {
			t.Fatal(err)
		}
	}
	before := DriverCalls()
	launch()
	assert.Equal(t, uint64(1), DriverCalls()-before)
	assert.Zero(t, testing.AllocsPerRun(200, launch))

	// The convenience form gives the same result.
	require.NoError(t, c.LaunchKernel(fn, g, b, 0, nil, DevicePtr(1), DevicePtr(2), DevicePtr(3), int32(4)))
	assert.ErrorContains(t, c.LaunchKernel(fn, g, b, 0, nil, DevicePtr(1)), "takes 4 parameters, got 1")

	// A failing launch is an *Error naming the kernel and configuration.
	fn.h = 701
	err = c.LaunchKernelArgs(fn, g, b, 0, nil, a.Reset().Ptr(1).Ptr(2).Ptr(3).Int32(4))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "cuLaunchKernel", e.Call)
	assert.Equal(t, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", e.Name)
	assert.Equal(t, "kernel vadd, grid [4096 1 1], block [256 1 1], 0 bytes shared, default stream", e.Detail)
}

func TestImageKind(t *testing.T) {
	k, err := imageKind([]byte("\x7fELF\x02\x01\x01"))
	require.NoError(t, err)
	assert.Equal(t, "cubin", k)
	k, err = imageKind([]byte{0x50, 0xED, 0x55, 0xBA, 0x01, 0x00})
	require.NoError(t, err)
	assert.Equal(t, "fatbin", k)
	k, err = imageKind([]byte(ptxVectorAdd))
	require.NoError(t, err)
	assert.Equal(t, "PTX", k)
	_, err = imageKind(nil)
	assert.ErrorIs(t, err, ErrInvalidValue)
	_, err = imageKind([]byte("just some text"))
	assert.ErrorContains(t, err, "14-byte image is neither a cubin (ELF), a fatbin nor PTX text")
}

func TestAlignedImage(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 4097} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i%250 + 1)
		}
		img := alignedImage(src[:n])
		require.Len(t, img, n+1)
		assert.Zero(t, uintptr(unsafe.Pointer(&img[0]))%8)
		assert.Equal(t, src, img[:n])
		assert.Zero(t, img[n], "NUL terminated")
	}
}

func TestLogText(t *testing.T) {
	buf := []byte("ptxas error   : syntax\x00garbage")
	assert.Equal(t, "ptxas error   : syntax", logText(buf, uintptr(len(buf))))
	assert.Equal(t, "ptxas", logText(buf, 5))
	assert.Equal(t, "ptxas error   : syntax", logText(buf, 1<<20))
}
