package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// The virtual memory management API (CUDA 10.2 and later): reserve a range
// of device addresses, create physical memory in pages of the allocation
// granularity, map pages into the range and give the device access. It is
// what expandable segments (package memory) are built on. The entry points
// are optional: a driver without them loads, and these methods then fail
// with ErrNotSupported.

// vmmSymbols are the API's entry points.
type vmmSymbols struct {
	addressReserve, addressFree, create, release, mapMem, unmap, setAccess, granularity symbol
}

// AttrVirtualMemoryManagementSupported is
// CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED.
const AttrVirtualMemoryManagementSupported DeviceAttribute = 102

// MemHandle is a CUmemGenericAllocationHandle: physical memory made by
// MemCreate.
type MemHandle uint64

// Constants of CUmemAllocationProp and CUmemAccessDesc.
const (
	memAllocationTypePinned = 1 // CU_MEM_ALLOCATION_TYPE_PINNED
	memHandleTypeNone       = 0 // CU_MEM_HANDLE_TYPE_NONE
	memLocationTypeDevice   = 1 // CU_MEM_LOCATION_TYPE_DEVICE
	memAccessFlagsReadWrite = 3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	memGranularityMinimum   = 0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM
)

// vmmArgs is the C memory of one call: a CUmemAllocationProp (32 bytes:
// type and requested handle types, location type and id, Win32 metadata
// pointer, allocation flags), a CUmemAccessDesc (12 bytes: location type
// and id, flags) and out-parameters. They come from a pool, so they live
// on the Go heap, which does not move them; the call keeps them alive.
type vmmArgs struct {
	prop [4]uint64
	desc [2]uint64
	out  [2]uint64
}

var vmmArgsPool = sync.Pool{New: func() any { return new(vmmArgs) }}

func getVMMArgs() *vmmArgs {
	if noPools {
		return new(vmmArgs)
	}
	a := vmmArgsPool.Get().(*vmmArgs)
	*a = vmmArgs{}
	return a
}

// pinnedDeviceProp fills a CUmemAllocationProp for pinned memory on the
// context's device: type PINNED, no shareable handle, location {DEVICE,
// ordinal}, no Win32 metadata, no compression.
func (c *Context) pinnedDeviceProp(a *vmmArgs) {
	a.prop = [4]uint64{}
	a.prop[0] = memAllocationTypePinned | memHandleTypeNone<<32
	a.prop[1] = memLocationTypeDevice | uint64(uint32(c.dev))<<32
}

// accessDesc fills a CUmemAccessDesc giving the context's device read and
// write access: location {DEVICE, ordinal}, flags READWRITE.
func (c *Context) accessDesc(a *vmmArgs) {
	a.desc[0] = memLocationTypeDevice | uint64(uint32(c.dev))<<32
	a.desc[1] = memAccessFlagsReadWrite
}

// VMMSupported reports whether the device supports the virtual memory
// management API and the driver exports every call of it.
func (c *Context) VMMSupported() bool {
	v := c.drv.vmm
	for _, s := range []symbol{v.addressReserve, v.addressFree, v.create, v.release, v.mapMem, v.unmap, v.setAccess, v.granularity} {
		if s.addr == 0 {
			return false
		}
	}
	ok, err := c.dev.Attribute(AttrVirtualMemoryManagementSupported)
	return err == nil && ok != 0
}

// vmmCall checks that sym exists and calls it with the context current,
// arguments that point into a (kept alive for the call).
func (c *Context) vmmCall(op string, sym symbol, a *vmmArgs, args ...uintptr) (status, error) {
	if sym.addr == 0 {
		return status{}, c.missing(op, sym)
	}
	s := c.invokeGo(sym, args...)
	runtime.KeepAlive(a)
	return s, nil
}

// MemAllocationGranularity returns the minimum granularity of pinned
// device memory on the context's device (cuMemGetAllocationGranularity):
// the size of a page of MemCreate and the alignment of MemMap, 2 MiB on
// current GPUs.
func (c *Context) MemAllocationGranularity() (int, error) {
	a := getVMMArgs()
	defer vmmArgsPool.Put(a)
	c.pinnedDeviceProp(a)
	s, err := c.vmmCall("MemAllocationGranularity", c.drv.vmm.granularity, a,
		uintptr(unsafe.Pointer(&a.out[0])), uintptr(unsafe.Pointer(&a.prop[0])), memGranularityMinimum)
	if err != nil {
		return 0, err
	}
	if !s.ok() {
		return 0, s.err(c.dev.String())
	}
	return int(a.out[0]), nil
}

// MemAddressReserve reserves size bytes of device address space aligned
// to alignment (0: the default), with nothing mapped (cuMemAddressReserve).
func (c *Context) MemAddressReserve(size, alignment int) (DevicePtr, error) {
	if err := checkSize("MemAddressReserve", size); err != nil {
		return 0, err
	}
	if alignment < 0 {
		return 0, invalidArg("MemAddressReserve", "alignment %d bytes: must be 0 (the default) or positive", alignment)
	}
	a := getVMMArgs()
	defer vmmArgsPool.Put(a)
	s, err := c.vmmCall("MemAddressReserve", c.drv.vmm.addressReserve, a,
		uintptr(unsafe.Pointer(&a.out[0])), uintptr(size), uintptr(alignment), 0, 0)
	if err != nil {
		return 0, err
	}
	if !s.ok() {
		return 0, s.err(c.sizeDetail(size))
	}
	return DevicePtr(a.out[0]), nil
}

// MemAddressFree gives back a reservation of MemAddressReserve; nothing
// may be mapped in it.
func (c *Context) MemAddressFree(p DevicePtr, size int) error {
	if p == 0 {
		return invalidArg("MemAddressFree", "nil device pointer")
	}
	if err := checkSize("MemAddressFree", size); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if c.drv.vmm.addressFree.addr == 0 {
		return c.missing("MemAddressFree", c.drv.vmm.addressFree)
	}
	if s := c.invoke(f, c.drv.vmm.addressFree, uintptr(p), uintptr(size)); !s.ok() {
		return s.err(fmt.Sprintf("%d bytes at %s", size, p))
	}
	return nil
}

// MemCreate creates size bytes of pinned physical memory on the context's
// device (cuMemCreate); size must be a multiple of the granularity. An
// exhausted device gives an error wrapping ErrOutOfMemory.
func (c *Context) MemCreate(size int) (MemHandle, error) {
	if err := checkSize("MemCreate", size); err != nil {
		return 0, err
	}
	a := getVMMArgs()
	defer vmmArgsPool.Put(a)
	c.pinnedDeviceProp(a)
	s, err := c.vmmCall("MemCreate", c.drv.vmm.create, a,
		uintptr(unsafe.Pointer(&a.out[0])), uintptr(size), uintptr(unsafe.Pointer(&a.prop[0])), 0)
	if err != nil {
		return 0, err
	}
	if !s.ok() {
		return 0, s.err(c.sizeDetail(size))
	}
	return MemHandle(a.out[0]), nil
}

// MemRelease releases physical memory of MemCreate (cuMemRelease); the
// memory is freed once it is mapped nowhere.
func (c *Context) MemRelease(h MemHandle) error {
	if h == 0 {
		return invalidArg("MemRelease", "nil handle")
	}
	if c.drv.vmm.release.addr == 0 {
		return c.missing("MemRelease", c.drv.vmm.release)
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.vmm.release, uintptr(h)); !s.ok() {
		return s.err(fmt.Sprintf("handle %#x", uint64(h)))
	}
	return nil
}

// MemMap maps the whole of h (size bytes) at p, inside a reservation
// (cuMemMap). The same memory may be mapped at several addresses. Access
// must then be given with MemSetAccess.
func (c *Context) MemMap(p DevicePtr, size int, h MemHandle) error {
	if p == 0 || h == 0 {
		return invalidArg("MemMap", "nil device pointer or handle")
	}
	if err := checkSize("MemMap", size); err != nil {
		return err
	}
	if c.drv.vmm.mapMem.addr == 0 {
		return c.missing("MemMap", c.drv.vmm.mapMem)
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.vmm.mapMem, uintptr(p), uintptr(size), 0, uintptr(h), 0); !s.ok() {
		return s.err(fmt.Sprintf("handle %#x, %d bytes at %s", uint64(h), size, p))
	}
	return nil
}

// MemSetAccess gives the context's device read and write access to the
// mapped range [p, p+size) (cuMemSetAccess); the range may span several
// mappings.
func (c *Context) MemSetAccess(p DevicePtr, size int) error {
	if p == 0 {
		return invalidArg("MemSetAccess", "nil device pointer")
	}
	if err := checkSize("MemSetAccess", size); err != nil {
		return err
	}
	a := getVMMArgs()
	defer vmmArgsPool.Put(a)
	c.accessDesc(a)
	s, err := c.vmmCall("MemSetAccess", c.drv.vmm.setAccess, a, uintptr(p), uintptr(size), uintptr(unsafe.Pointer(&a.desc[0])), 1)
	if err != nil {
		return err
	}
	if !s.ok() {
		return s.err(fmt.Sprintf("%d bytes at %s", size, p))
	}
	return nil
}

// MemUnmap unmaps the range [p, p+size), which must cover whole mappings
// (cuMemUnmap). Work still using it must have finished.
func (c *Context) MemUnmap(p DevicePtr, size int) error {
	if p == 0 {
		return invalidArg("MemUnmap", "nil device pointer")
	}
	if err := checkSize("MemUnmap", size); err != nil {
		return err
	}
	if c.drv.vmm.unmap.addr == 0 {
		return c.missing("MemUnmap", c.drv.vmm.unmap)
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.vmm.unmap, uintptr(p), uintptr(size)); !s.ok() {
		return s.err(fmt.Sprintf("%d bytes at %s", size, p))
	}
	return nil
}
