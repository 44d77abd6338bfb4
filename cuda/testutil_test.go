package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// libcSym resolves a libc function, the stand-in for driver entry points
// in the tests that run without a GPU. labs(x) returns |x|, so a fake
// driver function bound to it "returns" its first argument as the status.
func libcSym(t testing.TB, name string) symbol {
	t.Helper()
	if !platformSupported {
		t.Skip("C calls need linux")
	}
	h, err := dlopen("libc.so.6")
	if err != nil {
		t.Skipf("libc.so.6 not loadable: %v", err)
	}
	addr, err := dlsym(h, name)
	require.NoError(t, err)
	return symbol{name: name, addr: addr}
}

// fakeContext is a Context whose driver entry points are all labs: every
// call returns its first argument as the CUresult. It has H100-like
// limits for the launch checks.
func fakeContext(t testing.TB) *Context {
	labs := libcSym(t, "labs")
	d := &driver{path: "fake"}
	for _, s := range append(d.bootstrapSymbols(), d.symbols()...) {
		*s.dst = symbol{name: s.names[0], addr: labs.addr}
	}
	d.funcGetParamInfo, d.funcGetParamCount = symbol{}, symbol{}
	return &Context{dev: 0, h: 0, drv: d, props: Properties{
		MaxThreadsPerBlock: 1024, MaxBlockDim: [3]int{1024, 1024, 64},
		MaxGridDim: [3]int{1<<31 - 1, 65535, 65535}, MaxSharedMemPerBlock: 48 << 10, MaxSharedMemOptIn: 227 << 10,
	}}
}
