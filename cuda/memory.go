package cuda

import "fmt"

// DevicePtr is a CUdeviceptr: an address in the unified virtual address
// space of device, managed and mapped host memory.
type DevicePtr uintptr

// Add returns p offset by off bytes.
func (p DevicePtr) Add(off int) DevicePtr { return DevicePtr(int(p) + off) }

func (p DevicePtr) String() string { return fmt.Sprintf("%#x", uintptr(p)) }

// Advice is a CUmem_advise for MemAdvise.
type Advice int32

const (
	AdviseSetReadMostly          Advice = 1 // read-mostly: devices keep read-only copies
	AdviseUnsetReadMostly        Advice = 2
	AdviseSetPreferredLocation   Advice = 3 // pages prefer to live at the location
	AdviseUnsetPreferredLocation Advice = 4
	AdviseSetAccessedBy          Advice = 5 // keep the pages mapped for the location
	AdviseUnsetAccessedBy        Advice = 6
)

func (a Advice) String() string {
	switch a {
	case AdviseSetReadMostly:
		return "SetReadMostly"
	case AdviseUnsetReadMostly:
		return "UnsetReadMostly"
	case AdviseSetPreferredLocation:
		return "SetPreferredLocation"
	case AdviseUnsetPreferredLocation:
		return "UnsetPreferredLocation"
	case AdviseSetAccessedBy:
		return "SetAccessedBy"
	case AdviseUnsetAccessedBy:
		return "UnsetAccessedBy"
	}
	return fmt.Sprintf("Advice(%d)", int32(a))
}

// cuMemAllocManaged flag: accessible from any stream on any device.
const memAttachGlobal = 0x1

func checkSize(op string, size int) error {
	if size <= 0 {
		return invalidArg(op, "size %d bytes: must be positive", size)
	}
	return nil
}

func (c *Context) sizeDetail(size int) string { return fmt.Sprintf("%d bytes on %s", size, c.dev) }

// MemAlloc allocates size bytes of device memory (cuMemAlloc_v2). An
// exhausted device gives an error wrapping ErrOutOfMemory.
func (c *Context) MemAlloc(size int) (DevicePtr, error) {
	if err := checkSize("MemAlloc", size); err != nil {
		return 0, err
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memAlloc, f.outAddr(0), uintptr(size)); !s.ok() {
		return 0, s.err(c.sizeDetail(size))
	}
	return DevicePtr(f.out[0]), nil
}

// MemFree frees memory from MemAlloc or MemAllocManaged. It waits for
// nothing: work still using p must have finished.
func (c *Context) MemFree(p DevicePtr) error {
	if p == 0 {
		return invalidArg("MemFree", "nil device pointer")
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memFree, uintptr(p)); !s.ok() {
		return s.err(p.String())
	}
	return nil
}

// MemAllocAsync allocates size bytes from the device's default memory
// pool, ordered on stream s: the memory may be used by work queued on s
// after this call.
func (c *Context) MemAllocAsync(size int, s *Stream) (DevicePtr, error) {
	if err := checkSize("MemAllocAsync", size); err != nil {
		return 0, err
	}
	if c.drv.memAllocAsync.addr == 0 {
		return 0, c.missing("MemAllocAsync", c.drv.memAllocAsync)
	}
	sh, err := c.streamHandle("MemAllocAsync", s)
	if err != nil {
		return 0, err
	}
	f := getFrame()
	defer f.release()
	if st := c.invoke(f, c.drv.memAllocAsync, f.outAddr(0), uintptr(size), sh); !st.ok() {
		return 0, st.err(c.sizeDetail(size) + ", " + s.String())
	}
	return DevicePtr(f.out[0]), nil
}

// MemFreeAsync returns p to its pool once the work queued on s so far has
// finished.
func (c *Context) MemFreeAsync(p DevicePtr, s *Stream) error {
	if p == 0 {
		return invalidArg("MemFreeAsync", "nil device pointer")
	}
	if c.drv.memFreeAsync.addr == 0 {
		return c.missing("MemFreeAsync", c.drv.memFreeAsync)
	}
	sh, err := c.streamHandle("MemFreeAsync", s)
	if err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := c.invoke(f, c.drv.memFreeAsync, uintptr(p), sh); !st.ok() {
		return st.err(p.String() + ", " + s.String())
	}
	return nil
}

// MemAllocManaged allocates size bytes of managed (unified) memory,
// attached globally: any stream of any device may use it and the host may
// read and write it through UnsafeHostView. Free it with MemFree. Do not
// ask for more than the device has free: oversubscribing managed memory
// works, but thrashes.
func (c *Context) MemAllocManaged(size int) (DevicePtr, error) {
	if err := checkSize("MemAllocManaged", size); err != nil {
		return 0, err
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memAllocManaged, f.outAddr(0), uintptr(size), memAttachGlobal); !s.ok() {
		return 0, s.err(c.sizeDetail(size))
	}
	return DevicePtr(f.out[0]), nil
}

// MemAdvise gives the driver a hint about managed memory [p, p+size)
// (cuMemAdvise_v2). For the read-mostly advices and
// AdviseUnsetPreferredLocation the location is ignored, and the zero
// Location is accepted.
func (c *Context) MemAdvise(p DevicePtr, size int, advice Advice, loc Location) error {
	if p == 0 {
		return invalidArg("MemAdvise", "nil device pointer")
	}
	if err := checkSize("MemAdvise", size); err != nil {
		return err
	}
	switch advice {
	case AdviseSetReadMostly, AdviseUnsetReadMostly, AdviseUnsetPreferredLocation:
		if loc == (Location{}) {
			loc = DeviceLocation(c.dev)
		}
	case AdviseSetPreferredLocation, AdviseSetAccessedBy, AdviseUnsetAccessedBy:
	default:
		return invalidArg("MemAdvise", "unknown advice %d", int32(advice))
	}
	if err := loc.validate("MemAdvise"); err != nil {
		return err
	}
	if c.drv.memAdvise.addr == 0 {
		return c.missing("MemAdvise", c.drv.memAdvise)
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memAdvise, uintptr(p), uintptr(size), uintptr(advice), loc.packed()); !s.ok() {
		return s.err(fmt.Sprintf("%s for %d bytes at %s, %s", advice, size, p, loc))
	}
	return nil
}

// MemPrefetchAsync migrates managed memory [p, p+size) to loc, ordered on
// stream s (cuMemPrefetchAsync_v2).
func (c *Context) MemPrefetchAsync(p DevicePtr, size int, loc Location, s *Stream) error {
	if p == 0 {
		return invalidArg("MemPrefetchAsync", "nil device pointer")
	}
	if err := checkSize("MemPrefetchAsync", size); err != nil {
		return err
	}
	if err := loc.validate("MemPrefetchAsync"); err != nil {
		return err
	}
	if c.drv.memPrefetchAsync.addr == 0 {
		return c.missing("MemPrefetchAsync", c.drv.memPrefetchAsync)
	}
	sh, err := c.streamHandle("MemPrefetchAsync", s)
	if err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := c.invoke(f, c.drv.memPrefetchAsync, uintptr(p), uintptr(size), loc.packed(), 0, sh); !st.ok() {
		return st.err(fmt.Sprintf("%d bytes at %s to %s, %s", size, p, loc, s))
	}
	return nil
}

// missing reports an optional driver entry point this driver lacks.
func (c *Context) missing(op string, sym symbol) error {
	return notSupported(op, "the driver at %s (CUDA %s) lacks %s; update the NVIDIA driver",
		c.drv.path, versionString(c.drv.version), sym.name)
}
