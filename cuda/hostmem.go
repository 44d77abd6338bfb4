package cuda

import (
	"fmt"
	"unsafe"
)

// HostAllocFlags are cuMemHostAlloc flags.
type HostAllocFlags uint32

const (
	// HostAllocPortable: the memory is page-locked for every context,
	// not only the one that allocated it.
	HostAllocPortable HostAllocFlags = 0x1
	// HostAllocDeviceMap: the memory is mapped into the device address
	// space (zero-copy); MemHostGetDevicePointer gives the device alias.
	HostAllocDeviceMap HostAllocFlags = 0x2
	// HostAllocWriteCombined: faster for the device to read over PCIe and
	// for the host to write, very slow for the host to read.
	HostAllocWriteCombined HostAllocFlags = 0x4
)

// MemHostAlloc allocates size bytes of page-locked host memory. It returns
// the host pointer and a []byte view of the same bytes; both stay valid
// until MemFreeHost. Copies from and to it run at full bus speed and
// truly asynchronously. Exhausted page-locked memory gives an error
// wrapping ErrOutOfMemory.
func (c *Context) MemHostAlloc(size int, flags HostAllocFlags) (unsafe.Pointer, []byte, error) {
	if err := checkSize("MemHostAlloc", size); err != nil {
		return nil, nil, err
	}
	if flags&^(HostAllocPortable|HostAllocDeviceMap|HostAllocWriteCombined) != 0 {
		return nil, nil, invalidArg("MemHostAlloc", "unknown flags %#x", uint32(flags))
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memHostAlloc, f.outAddr(0), uintptr(size), uintptr(flags)); !s.ok() {
		return nil, nil, s.err(fmt.Sprintf("%d bytes of page-locked host memory, flags %#x", size, uint32(flags)))
	}
	p := addrPointer(uintptr(f.out[0]))
	return p, unsafe.Slice((*byte)(p), size), nil
}

// MemHostGetDevicePointer returns the device address of page-locked memory
// allocated with HostAllocDeviceMap (equal to the host address when the
// device has unified addressing). Kernels reading it read host memory
// across the bus.
func (c *Context) MemHostGetDevicePointer(p unsafe.Pointer) (DevicePtr, error) {
	if p == nil {
		return 0, invalidArg("MemHostGetDevicePointer", "nil host pointer")
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memHostGetDevicePointer, f.outAddr(0), uintptr(p), 0); !s.ok() {
		return 0, s.err(fmt.Sprintf("host pointer %p (was it allocated with HostAllocDeviceMap?)", p))
	}
	return DevicePtr(f.out[0]), nil
}

// MemFreeHost frees memory from MemHostAlloc; its []byte view must not be
// used afterwards.
func (c *Context) MemFreeHost(p unsafe.Pointer) error {
	if p == nil {
		return invalidArg("MemFreeHost", "nil host pointer")
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memFreeHost, uintptr(p)); !s.ok() {
		return s.err(fmt.Sprintf("host pointer %p", p))
	}
	return nil
}

// UnsafeHostView returns a []byte over n bytes at p, for memory the host
// can address directly: managed memory from MemAllocManaged, and the
// device alias of mapped host memory. Plain device memory is not host
// addressable: touching such a view crashes the program. The view is
// valid until the memory is freed.
func UnsafeHostView(p DevicePtr, n int) []byte {
	if p == 0 || n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(addrPointer(uintptr(p))), n)
}
