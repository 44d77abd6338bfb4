package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// CUjit_option values used to collect the JIT compiler's logs.
const (
	jitInfoLogBuffer          = 3
	jitInfoLogBufferSizeBytes = 4
	jitErrorLogBuffer         = 5
	jitErrorLogBufferSize     = 6
	jitLogBytes               = 16 << 10
)

// Module is a loaded CUDA module: kernels from a cubin, a fatbin or PTX.
type Module struct {
	ctx      *Context
	h        uintptr
	kind     string // "cubin", "fatbin" or "PTX"
	infoLog  string
	unloaded bool
}

// imageKind classifies a module image by its first bytes.
func imageKind(image []byte) (string, error) {
	switch {
	case len(image) == 0:
		return "", invalidArg("ModuleLoadData", "empty image")
	case len(image) >= 4 && string(image[:4]) == "\x7fELF":
		return "cubin", nil
	case len(image) >= 4 && binary.LittleEndian.Uint32(image) == 0xBA55ED50:
		return "fatbin", nil
	case bytes.Contains(image[:min(len(image), 4096)], []byte(".version")) ||
		bytes.Contains(image[:min(len(image), 4096)], []byte(".target")):
		return "PTX", nil
	}
	return "", invalidArg("ModuleLoadData", "%d-byte image is neither a cubin (ELF), a fatbin nor PTX text (no .version or .target directive in its first 4 KiB)", len(image))
}

// alignedImage copies image into 8-byte aligned memory with a NUL after
// it: the driver reads fatbin headers as 8-byte words and PTX as a C
// string.
func alignedImage(image []byte) []byte {
	words := make([]uint64, (len(image)+8)/8)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	copy(buf, image)
	return buf[:len(image)+1]
}

// ModuleLoadData loads a module from memory: a cubin, a fatbin (as nvcc
// -fatbin writes) or PTX text, which the driver compiles for this device.
// A failure carries the JIT compiler's error log.
func (c *Context) ModuleLoadData(image []byte) (*Module, error) {
	kind, err := imageKind(image)
	if err != nil {
		return nil, err
	}
	img := alignedImage(image)
	infoLog := make([]byte, jitLogBytes)
	errLog := make([]byte, jitLogBytes)
	opts := []int32{jitInfoLogBuffer, jitInfoLogBufferSizeBytes, jitErrorLogBuffer, jitErrorLogBufferSize}
	vals := []uintptr{uintptr(unsafe.Pointer(&infoLog[0])), jitLogBytes, uintptr(unsafe.Pointer(&errLog[0])), jitLogBytes}
	// vals holds pointers to Go memory that C writes during the call: pin
	// what it points to, as the cgo rules require.
	var pin runtime.Pinner
	pin.Pin(&infoLog[0])
	pin.Pin(&errLog[0])
	defer pin.Unpin()
	out := new(uintptr)
	st := c.invokeGo(c.drv.moduleLoadDataEx, uintptr(unsafe.Pointer(out)), uintptr(unsafe.Pointer(&img[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	info := logText(infoLog, vals[1])
	if !st.ok() {
		detail := fmt.Sprintf("%d-byte %s image on %s", len(image), kind, c.dev)
		if e := logText(errLog, vals[3]); e != "" {
			detail += "; JIT log: " + e
		}
		return nil, st.err(detail)
	}
	return &Module{ctx: c, h: *out, kind: kind, infoLog: info}, nil
}

// logText reads a JIT log buffer; n is the size the driver wrote back.
func logText(buf []byte, n uintptr) string {
	if n > uintptr(len(buf)) {
		n = uintptr(len(buf))
	}
	b := buf[:n]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(bytes.TrimSpace(b))
}

// Handle returns the CUmodule.
func (m *Module) Handle() uintptr { return m.h }

// Kind says what the module was loaded from: "cubin", "fatbin" or "PTX".
func (m *Module) Kind() string { return m.kind }

// InfoLog returns the JIT compiler's informational log (often empty).
func (m *Module) InfoLog() string { return m.infoLog }

// made refuses a nil Module and one not made by ModuleLoadData (the
// zero value), which has no context to call the driver with.
func (m *Module) made(op string) error {
	if m == nil || m.ctx == nil {
		return invalidArg(op, "module not made by ModuleLoadData")
	}
	return nil
}

// Function looks up a kernel by its (extern "C" or mangled) name.
func (m *Module) Function(name string) (*Function, error) {
	if err := m.made("Module.Function"); err != nil {
		return nil, err
	}
	if m.unloaded {
		return nil, invalidArg("Module.Function", "module was unloaded")
	}
	if name == "" {
		return nil, invalidArg("Module.Function", "empty kernel name")
	}
	if strings.IndexByte(name, 0) >= 0 {
		// The driver reads a C string: it would look up the name's
		// prefix, another kernel, under this name.
		return nil, invalidArg("Module.Function", "kernel name %q contains a NUL byte", name)
	}
	c := m.ctx
	cname := cStringBytes(name)
	out := new(uintptr)
	if st := c.invokeGo(c.drv.moduleGetFunction, uintptr(unsafe.Pointer(out)), m.h, uintptr(unsafe.Pointer(&cname[0]))); !st.ok() {
		return nil, st.err(fmt.Sprintf("kernel %q in a %s module", name, m.kind))
	}
	fn := &Function{mod: m, h: *out, name: name}
	fn.params = c.paramSizes(*out)
	return fn, nil
}

// Unload unloads the module; its functions must not be launched again.
// Unloading twice is a no-op.
func (m *Module) Unload() error {
	if err := m.made("Module.Unload"); err != nil {
		return err
	}
	if m.unloaded {
		return nil
	}
	f := getFrame()
	defer f.release()
	if st := m.ctx.invoke(f, m.ctx.drv.moduleUnload, m.h); !st.ok() {
		return st.err(m.kind + " module")
	}
	m.unloaded = true
	return nil
}

// Function is a kernel of a loaded module.
type Function struct {
	mod    *Module
	h      uintptr
	name   string
	params []int // parameter sizes in bytes; nil when the driver cannot tell
}

// Name returns the kernel's name.
func (fn *Function) Name() string { return fn.name }

// Handle returns the CUfunction.
func (fn *Function) Handle() uintptr { return fn.h }

// ParamSizes returns the size in bytes of each kernel parameter, as the
// driver reports them (CUDA 12.4 or newer), or nil when it cannot. Launches
// check their arguments against these sizes.
func (fn *Function) ParamSizes() []int { return append([]int(nil), fn.params...) }

// paramSizes asks the driver for a kernel's parameter sizes, or returns
// nil if this driver cannot say.
func (c *Context) paramSizes(h uintptr) []int {
	if c.drv.funcGetParamInfo.addr == 0 {
		return nil
	}
	f := getFrame()
	defer f.release()
	limit := MaxKernelArgs + 1
	if c.drv.funcGetParamCount.addr != 0 {
		if st := c.invoke(f, c.drv.funcGetParamCount, h, f.outAddr(0)); !st.ok() || f.out[0] > MaxKernelArgs {
			return nil
		}
		limit = int(f.out[0])
	}
	sizes := []int{}
	for i := 0; i < limit; i++ {
		st := c.invoke(f, c.drv.funcGetParamInfo, h, uintptr(i), f.outAddr(0), f.outAddr(1))
		if st.code == cudaErrorInvalidValue && c.drv.funcGetParamCount.addr == 0 {
			return sizes // past the last parameter
		}
		if !st.ok() {
			return nil
		}
		sizes = append(sizes, int(f.out[1]))
	}
	if len(sizes) > MaxKernelArgs {
		return nil
	}
	return sizes
}

// FuncAttribute is a CUfunction_attribute.
type FuncAttribute int32

const (
	FuncMaxThreadsPerBlock        FuncAttribute = 0
	FuncSharedSizeBytes           FuncAttribute = 1
	FuncConstSizeBytes            FuncAttribute = 2
	FuncLocalSizeBytes            FuncAttribute = 3
	FuncNumRegs                   FuncAttribute = 4
	FuncPTXVersion                FuncAttribute = 5
	FuncBinaryVersion             FuncAttribute = 6
	FuncMaxDynamicSharedSizeBytes FuncAttribute = 8
)

// usable refuses a nil function and one whose module was unloaded, before
// any driver call.
func (fn *Function) usable(op string) error {
	if fn == nil || fn.mod == nil || fn.mod.ctx == nil {
		return invalidArg(op, "nil function")
	}
	if fn.mod.unloaded {
		return invalidArg(op, "kernel %s: its module was unloaded", fn.name)
	}
	return nil
}

// Attribute returns one attribute of the kernel, e.g. FuncNumRegs.
func (fn *Function) Attribute(a FuncAttribute) (int, error) {
	if err := fn.usable("Function.Attribute"); err != nil {
		return 0, err
	}
	c := fn.mod.ctx
	f := getFrame()
	defer f.release()
	if st := c.invoke(f, c.drv.funcGetAttribute, f.outAddr(0), uintptr(a), fn.h); !st.ok() {
		return 0, st.err(fmt.Sprintf("kernel %s attribute %d", fn.name, a))
	}
	return int(f.out32(0)), nil
}

// SetMaxDynamicSharedMem lets launches of the kernel use up to bytes of
// dynamic shared memory; beyond 48 KiB this opt-in is required.
func (fn *Function) SetMaxDynamicSharedMem(bytes int) error {
	if err := fn.usable("SetMaxDynamicSharedMem"); err != nil {
		return err
	}
	c := fn.mod.ctx
	if bytes < 0 || bytes > c.props.MaxSharedMemOptIn {
		return invalidArg("SetMaxDynamicSharedMem", "%d bytes: %s allows 0 to %d", bytes, c.dev, c.props.MaxSharedMemOptIn)
	}
	f := getFrame()
	defer f.release()
	if st := c.invoke(f, c.drv.funcSetAttribute, fn.h, uintptr(FuncMaxDynamicSharedSizeBytes), uintptr(bytes)); !st.ok() {
		return st.err(fmt.Sprintf("kernel %s, %d bytes", fn.name, bytes))
	}
	return nil
}
