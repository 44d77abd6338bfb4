package cuda

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// symbol is one resolved C function: its address and the name it was
// found under (for error messages). A zero addr marks an optional symbol
// the loaded library lacks.
type symbol struct {
	name string
	addr uintptr
}

// symbolSpec lists the names a symbol may be exported under, preferred
// first, and whether the package can work without it.
type symbolSpec struct {
	dst      *symbol
	required bool
	names    []string
}

// resolve fills every symbol in specs from the library handle and returns
// the names of required symbols it could not find.
func resolve(handle uintptr, specs []symbolSpec) (missing []string) {
	for _, s := range specs {
		*s.dst = symbol{name: s.names[0]}
		for _, n := range s.names {
			if addr, err := dlsym(handle, n); err == nil && addr != 0 {
				*s.dst = symbol{name: n, addr: addr}
				break
			}
		}
		if s.dst.addr == 0 && s.required {
			missing = append(missing, s.names[0])
		}
	}
	return missing
}

// driver is the loaded libcuda: every entry point this package calls.
// Versioned names (_v2) are the ones CUDA 12 and 13 headers map the plain
// names to; calling an older unversioned export would use an older ABI.
type driver struct {
	path    string
	version int      // cuDriverGetVersion, e.g. 13000
	devices []uint32 // CUdevice handle of each ordinal

	init, driverGetVersion, getErrorName, getErrorString symbol

	deviceGetCount, deviceGet, deviceGetName, deviceTotalMem, deviceGetAttribute, deviceGetPCIBusID symbol

	primaryCtxRetain, ctxSetCurrent, ctxGetCurrent, ctxSynchronize symbol

	memGetInfo, memAlloc, memFree, memAllocManaged, memAdvise, memPrefetchAsync                                   symbol
	memAllocAsync, memFreeAsync, deviceGetDefaultMemPool, memPoolSetAttribute, memPoolGetAttribute, memPoolTrimTo symbol
	memHostAlloc, memHostGetDevicePointer, memFreeHost                                                            symbol

	memcpyHtoD, memcpyDtoH, memcpyDtoD, memcpyHtoDAsync, memcpyDtoHAsync, memcpyDtoDAsync symbol
	memsetD8, memsetD32, memsetD8Async, memsetD32Async                                    symbol

	streamCreate, streamDestroy, streamSynchronize, streamQuery, streamWaitEvent       symbol
	streamCreateWithPriority, ctxGetStreamPriorityRange                                symbol
	eventCreate, eventRecord, eventSynchronize, eventQuery, eventDestroy, eventElapsed symbol

	moduleLoadDataEx, moduleGetFunction, moduleUnload, funcGetAttribute, funcSetAttribute, launchKernel symbol
	funcGetParamInfo, funcGetParamCount                                                                 symbol

	vmm   vmmSymbols   // the virtual memory management API (vmm.go)
	graph graphSymbols // stream capture and graphs (graph.go)
}

func (d *driver) bootstrapSymbols() []symbolSpec {
	return []symbolSpec{
		{&d.init, true, []string{"cuInit"}},
		{&d.driverGetVersion, true, []string{"cuDriverGetVersion"}},
		{&d.getErrorName, true, []string{"cuGetErrorName"}},
		{&d.getErrorString, true, []string{"cuGetErrorString"}},
	}
}

func (d *driver) symbols() []symbolSpec {
	req := func(dst *symbol, names ...string) symbolSpec { return symbolSpec{dst, true, names} }
	opt := func(dst *symbol, names ...string) symbolSpec { return symbolSpec{dst, false, names} }
	return append([]symbolSpec{
		req(&d.deviceGetCount, "cuDeviceGetCount"),
		req(&d.deviceGet, "cuDeviceGet"),
		req(&d.deviceGetName, "cuDeviceGetName"),
		req(&d.deviceTotalMem, "cuDeviceTotalMem_v2"),
		req(&d.deviceGetAttribute, "cuDeviceGetAttribute"),
		req(&d.deviceGetPCIBusID, "cuDeviceGetPCIBusId"),

		req(&d.primaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		req(&d.ctxSetCurrent, "cuCtxSetCurrent"),
		req(&d.ctxGetCurrent, "cuCtxGetCurrent"),
		req(&d.ctxSynchronize, "cuCtxSynchronize"),

		req(&d.memGetInfo, "cuMemGetInfo_v2"),
		req(&d.memAlloc, "cuMemAlloc_v2"),
		req(&d.memFree, "cuMemFree_v2"),
		req(&d.memAllocManaged, "cuMemAllocManaged"),
		opt(&d.memAdvise, "cuMemAdvise_v2"),
		opt(&d.memPrefetchAsync, "cuMemPrefetchAsync_v2"),
		opt(&d.memAllocAsync, "cuMemAllocAsync"),
		opt(&d.memFreeAsync, "cuMemFreeAsync"),
		opt(&d.deviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool"),
		opt(&d.memPoolSetAttribute, "cuMemPoolSetAttribute"),
		opt(&d.memPoolGetAttribute, "cuMemPoolGetAttribute"),
		opt(&d.memPoolTrimTo, "cuMemPoolTrimTo"),
		req(&d.memHostAlloc, "cuMemHostAlloc"),
		req(&d.memHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
		req(&d.memFreeHost, "cuMemFreeHost"),

		req(&d.memcpyHtoD, "cuMemcpyHtoD_v2"),
		req(&d.memcpyDtoH, "cuMemcpyDtoH_v2"),
		req(&d.memcpyDtoD, "cuMemcpyDtoD_v2"),
		req(&d.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		req(&d.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		req(&d.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
		req(&d.memsetD8, "cuMemsetD8_v2"),
		req(&d.memsetD32, "cuMemsetD32_v2"),
		req(&d.memsetD8Async, "cuMemsetD8Async"),
		req(&d.memsetD32Async, "cuMemsetD32Async"),

		req(&d.streamCreate, "cuStreamCreate"),
		req(&d.streamCreateWithPriority, "cuStreamCreateWithPriority"),
		req(&d.ctxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange"),
		req(&d.streamDestroy, "cuStreamDestroy_v2"),
		req(&d.streamSynchronize, "cuStreamSynchronize"),
		req(&d.streamQuery, "cuStreamQuery"),
		req(&d.streamWaitEvent, "cuStreamWaitEvent"),
		req(&d.eventCreate, "cuEventCreate"),
		req(&d.eventRecord, "cuEventRecord"),
		req(&d.eventSynchronize, "cuEventSynchronize"),
		req(&d.eventQuery, "cuEventQuery"),
		req(&d.eventDestroy, "cuEventDestroy_v2"),
		req(&d.eventElapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime"),

		req(&d.moduleLoadDataEx, "cuModuleLoadDataEx"),
		req(&d.moduleGetFunction, "cuModuleGetFunction"),
		req(&d.moduleUnload, "cuModuleUnload"),
		req(&d.funcGetAttribute, "cuFuncGetAttribute"),
		req(&d.funcSetAttribute, "cuFuncSetAttribute"),
		req(&d.launchKernel, "cuLaunchKernel"),
		opt(&d.funcGetParamInfo, "cuFuncGetParamInfo"),
		opt(&d.funcGetParamCount, "cuFuncGetParamCount"),

		opt(&d.vmm.addressReserve, "cuMemAddressReserve"),
		opt(&d.vmm.addressFree, "cuMemAddressFree"),
		opt(&d.vmm.create, "cuMemCreate"),
		opt(&d.vmm.release, "cuMemRelease"),
		opt(&d.vmm.mapMem, "cuMemMap"),
		opt(&d.vmm.unmap, "cuMemUnmap"),
		opt(&d.vmm.setAccess, "cuMemSetAccess"),
		opt(&d.vmm.granularity, "cuMemGetAllocationGranularity"),
	}, d.graph.specs(opt)...)
}

// loadDriver finds libcuda, initialises it and resolves every symbol.
func loadDriver(getenv func(string) string) (*driver, error) {
	h, path, err := openLibrary(driverSpec(), getenv)
	if err != nil {
		return nil, err
	}
	d := &driver{path: path}
	if missing := resolve(h, d.bootstrapSymbols()); len(missing) > 0 {
		return nil, fmt.Errorf("cuda: %s is not a CUDA driver library: it lacks %s: %s: %w",
			path, strings.Join(missing, ", "), driverSpec().Fix, ErrNoDriver)
	}
	f := getFrame()
	defer f.release()
	if r := uint32(f.call(d.init.addr, 0)); r != cudaSuccess {
		return nil, d.initError(r, path)
	}
	if r := uint32(f.call(d.driverGetVersion.addr, f.outAddr(0))); r != cudaSuccess {
		return nil, d.newError("cuDriverGetVersion", r, path)
	}
	d.version = int(f.out32(0))
	if missing := resolve(h, d.symbols()); len(missing) > 0 {
		return nil, fmt.Errorf("cuda: %s (driver API %s) lacks %s: update the NVIDIA driver to one for CUDA 12 or newer: %w",
			path, versionString(d.version), strings.Join(missing, ", "), ErrNoDriver)
	}
	if r := uint32(f.call(d.deviceGetCount.addr, f.outAddr(0))); r != cudaSuccess {
		return nil, d.newError(d.deviceGetCount.name, r, "")
	}
	n := int(f.out32(0))
	d.devices = make([]uint32, n)
	for i := range n {
		if r := uint32(f.call(d.deviceGet.addr, f.outAddr(1), uintptr(i))); r != cudaSuccess {
			return nil, d.newError(d.deviceGet.name, r, fmt.Sprintf("ordinal %d", i))
		}
		d.devices[i] = uint32(f.out[1])
	}
	return d, nil
}

// initError describes a failed cuInit. The toolkit's stub library is
// named as such. CUDA_ERROR_UNKNOWN and CUDA_ERROR_OPERATING_SYSTEM are
// what cuInit returns where the driver library is present but no GPU is
// usable (a container without the device nodes, a driver whose kernel
// module is missing or of another version): they wrap ErrNoDriver too,
// so that a caller falling back to the CPU on ErrNoDriver does so there,
// while the *Error keeps the code. Other codes keep their own sentinel,
// if any (ErrNoDevice for CUDA_ERROR_NO_DEVICE); a later call failing
// with CUDA_ERROR_UNKNOWN is a fault of that call, not a missing driver.
func (d *driver) initError(r uint32, path string) error {
	switch r {
	case cudaErrorStubLibrary:
		return fmt.Errorf("cuda: %s is the CUDA toolkit's stub library, not the driver: %s: %w",
			path, driverSpec().Fix, ErrNoDriver)
	case cudaErrorUnknown, cudaErrorOperatingSystem:
		return fmt.Errorf("%w: the driver cannot use a GPU here: %w", d.newError("cuInit", r, path), ErrNoDriver)
	}
	return d.newError("cuInit", r, path)
}

// newError describes a failed call using this driver's own error names.
func (d *driver) newError(call string, code uint32, detail string) *Error {
	e := &Error{Library: LibDriver, Call: call, Detail: detail, Code: int(int32(code))}
	t := fallbackText(driverStatusText, "CUDA_ERROR_", e.Code)
	e.Name, e.Message = t.name, t.msg
	if name := d.errorString(d.getErrorName, code); name != "" {
		e.Name = name
	}
	if msg := d.errorString(d.getErrorString, code); msg != "" {
		e.Message = msg
	}
	return e
}

// errorString calls cuGetErrorName or cuGetErrorString for code.
func (d *driver) errorString(sym symbol, code uint32) string {
	if sym.addr == 0 {
		return ""
	}
	f := getFrame()
	defer f.release()
	if r := uint32(f.call(sym.addr, uintptr(code), f.outAddr(0))); r != cudaSuccess {
		return ""
	}
	return cString(uintptr(f.out[0]))
}

// versionString renders a CUDA version number (12040) as "12.4".
func versionString(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

var state struct {
	once sync.Once
	drv  *driver
	err  error
}

// loaded is the driver once Init has succeeded.
var loaded atomic.Pointer[driver]

func loadedDriver() *driver { return loaded.Load() }

// Init loads and initialises the CUDA driver. It runs once per process;
// later calls return the first result. Every other function calls it, so
// calling it explicitly only moves the cost (a few milliseconds, more on
// the first use of a GPU after boot) and lets a program report a missing
// driver early. The error wraps ErrNoDriver when libcuda cannot be loaded
// or is unusable (it then lists every file tried and how to fix it), and
// ErrNoDevice when the driver sees no GPU.
func Init() error {
	state.once.Do(func() {
		state.drv, state.err = loadDriver(os.Getenv)
		if state.err == nil {
			loaded.Store(state.drv)
		}
	})
	return state.err
}

// getDriver returns the initialised driver.
func getDriver() (*driver, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	return state.drv, nil
}

// Available reports whether the driver loads and sees at least one GPU.
func Available() bool {
	d, err := getDriver()
	return err == nil && len(d.devices) > 0
}

// DriverVersion returns the CUDA version the driver supports, as
// cuDriverGetVersion reports it (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	d, err := getDriver()
	if err != nil {
		return 0, err
	}
	return d.version, nil
}

// DriverPath returns the file libcuda was loaded from.
func DriverPath() (string, error) {
	d, err := getDriver()
	if err != nil {
		return "", err
	}
	return d.path, nil
}
