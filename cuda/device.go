package cuda

import (
	"fmt"
	"unsafe"
)

// Device is a CUDA device ordinal, from 0 to DeviceCount()-1. Its methods
// query the driver directly and need no context.
type Device int

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int32

// Device attributes this project uses; any other CUdevice_attribute value
// works with Device.Attribute too.
const (
	AttrMaxThreadsPerBlock         DeviceAttribute = 1
	AttrMaxBlockDimX               DeviceAttribute = 2
	AttrMaxBlockDimY               DeviceAttribute = 3
	AttrMaxBlockDimZ               DeviceAttribute = 4
	AttrMaxGridDimX                DeviceAttribute = 5
	AttrMaxGridDimY                DeviceAttribute = 6
	AttrMaxGridDimZ                DeviceAttribute = 7
	AttrMaxSharedMemoryPerBlock    DeviceAttribute = 8
	AttrWarpSize                   DeviceAttribute = 10
	AttrMultiprocessorCount        DeviceAttribute = 16
	AttrCanMapHostMemory           DeviceAttribute = 19
	AttrL2CacheSize                DeviceAttribute = 38
	AttrUnifiedAddressing          DeviceAttribute = 41
	AttrComputeCapabilityMajor     DeviceAttribute = 75
	AttrComputeCapabilityMinor     DeviceAttribute = 76
	AttrManagedMemory              DeviceAttribute = 83
	AttrPageableMemoryAccess       DeviceAttribute = 88
	AttrConcurrentManagedAccess    DeviceAttribute = 89
	AttrMaxSharedMemoryPerBlockOpt DeviceAttribute = 97
	AttrMemoryPoolsSupported       DeviceAttribute = 115
)

// DeviceCount returns the number of CUDA devices the driver sees.
func DeviceCount() (int, error) {
	d, err := getDriver()
	if err != nil {
		return 0, err
	}
	return len(d.devices), nil
}

func (dev Device) String() string { return fmt.Sprintf("cuda:%d", int(dev)) }

// handle validates the ordinal and returns its CUdevice.
func (dev Device) handle() (*driver, uintptr, error) {
	d, err := getDriver()
	if err != nil {
		return nil, 0, err
	}
	if int(dev) < 0 || int(dev) >= len(d.devices) {
		return nil, 0, &argError{op: dev.String(), msg: fmt.Sprintf("no such device: the driver sees %d", len(d.devices)), kind: ErrNoDevice}
	}
	return d, uintptr(d.devices[dev]), nil
}

// Name returns the device's marketing name, e.g. "NVIDIA H200".
func (dev Device) Name() (string, error) {
	d, h, err := dev.handle()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	if r := uint32(ccall(d.deviceGetName.addr, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), h)); r != cudaSuccess {
		return "", d.newError(d.deviceGetName.name, r, dev.String())
	}
	return cString(uintptr(unsafe.Pointer(&buf[0]))), nil
}

// PCIBusID returns the device's PCI address, e.g. "0000:19:00.0".
func (dev Device) PCIBusID() (string, error) {
	d, h, err := dev.handle()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	if r := uint32(ccall(d.deviceGetPCIBusID.addr, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), h)); r != cudaSuccess {
		return "", d.newError(d.deviceGetPCIBusID.name, r, dev.String())
	}
	return cString(uintptr(unsafe.Pointer(&buf[0]))), nil
}

// TotalMem returns the device's memory in bytes.
func (dev Device) TotalMem() (int, error) {
	d, h, err := dev.handle()
	if err != nil {
		return 0, err
	}
	f := getFrame()
	defer f.release()
	if r := uint32(f.call(d.deviceTotalMem.addr, f.outAddr(0), h)); r != cudaSuccess {
		return 0, d.newError(d.deviceTotalMem.name, r, dev.String())
	}
	return int(f.out[0]), nil
}

// Attribute returns one CUdevice_attribute of the device.
func (dev Device) Attribute(a DeviceAttribute) (int, error) {
	d, h, err := dev.handle()
	if err != nil {
		return 0, err
	}
	f := getFrame()
	defer f.release()
	if r := uint32(f.call(d.deviceGetAttribute.addr, f.outAddr(0), uintptr(a), h)); r != cudaSuccess {
		return 0, d.newError(d.deviceGetAttribute.name, r, fmt.Sprintf("%s attribute %d", dev, a))
	}
	return int(f.out32(0)), nil
}

// ComputeCapability returns the SM version, e.g. 9, 0 for an H200.
func (dev Device) ComputeCapability() (major, minor int, err error) {
	if major, err = dev.Attribute(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	if minor, err = dev.Attribute(AttrComputeCapabilityMinor); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// Properties is what this project needs to know about a device, read in
// one go by Device.Properties.
type Properties struct {
	Ordinal  int
	Name     string
	PCIBusID string
	TotalMem int // bytes

	Major, Minor    int // compute capability
	Multiprocessors int
	WarpSize        int
	L2CacheSize     int // bytes

	MaxThreadsPerBlock   int
	MaxBlockDim          [3]int
	MaxGridDim           [3]int
	MaxSharedMemPerBlock int // bytes without opt-in
	MaxSharedMemOptIn    int // bytes with cuFuncSetAttribute opt-in
	UnifiedAddressing    bool
	ManagedMemory        bool
	ConcurrentManaged    bool // CPU and GPU may touch managed memory concurrently
	CanMapHostMemory     bool
	PageableMemoryAccess bool
	MemoryPoolsSupported bool // cuMemAllocAsync works
}

// Properties reads the device's name, memory and attributes.
func (dev Device) Properties() (Properties, error) {
	p := Properties{Ordinal: int(dev)}
	var err error
	if p.Name, err = dev.Name(); err != nil {
		return p, err
	}
	if p.PCIBusID, err = dev.PCIBusID(); err != nil {
		return p, err
	}
	if p.TotalMem, err = dev.TotalMem(); err != nil {
		return p, err
	}
	ints := []struct {
		dst *int
		a   DeviceAttribute
	}{
		{&p.Major, AttrComputeCapabilityMajor}, {&p.Minor, AttrComputeCapabilityMinor},
		{&p.Multiprocessors, AttrMultiprocessorCount}, {&p.WarpSize, AttrWarpSize},
		{&p.L2CacheSize, AttrL2CacheSize}, {&p.MaxThreadsPerBlock, AttrMaxThreadsPerBlock},
		{&p.MaxBlockDim[0], AttrMaxBlockDimX}, {&p.MaxBlockDim[1], AttrMaxBlockDimY}, {&p.MaxBlockDim[2], AttrMaxBlockDimZ},
		{&p.MaxGridDim[0], AttrMaxGridDimX}, {&p.MaxGridDim[1], AttrMaxGridDimY}, {&p.MaxGridDim[2], AttrMaxGridDimZ},
		{&p.MaxSharedMemPerBlock, AttrMaxSharedMemoryPerBlock}, {&p.MaxSharedMemOptIn, AttrMaxSharedMemoryPerBlockOpt},
	}
	for _, q := range ints {
		if *q.dst, err = dev.Attribute(q.a); err != nil {
			return p, err
		}
	}
	bools := []struct {
		dst *bool
		a   DeviceAttribute
	}{
		{&p.UnifiedAddressing, AttrUnifiedAddressing}, {&p.ManagedMemory, AttrManagedMemory},
		{&p.ConcurrentManaged, AttrConcurrentManagedAccess}, {&p.CanMapHostMemory, AttrCanMapHostMemory},
		{&p.PageableMemoryAccess, AttrPageableMemoryAccess}, {&p.MemoryPoolsSupported, AttrMemoryPoolsSupported},
	}
	for _, q := range bools {
		v, err := dev.Attribute(q.a)
		if err != nil {
			return p, err
		}
		*q.dst = v != 0
	}
	return p, nil
}
