package nccl

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/strata-ml/strata/internal/dl"
)

// EnvNCCLLib names the NCCL library file. When it is set, only that file
// is tried.
const EnvNCCLLib = "STRATA_NCCL_LIB"

// ErrNotAvailable: libnccl could not be loaded, or lacks a function this
// package calls. Every discovery error wraps it.
var ErrNotAvailable = errors.New("nccl: NCCL library not available")

// fix says how to repair a failed discovery.
const fix = "install NCCL 2.x (the libnccl2 package, NVIDIA's nvidia-nccl-cu12/-cu13 wheel, " +
	"or the tarball from developer.nvidia.com/nccl), add its lib folder to LD_LIBRARY_PATH, " +
	"or set " + EnvNCCLLib + " to the full path of libnccl.so.2"

// libNames are the sonames tried first, through the dynamic loader's own
// search (LD_LIBRARY_PATH, the ld.so cache).
var libNames = []string{"libnccl.so.2", "libnccl.so"}

// libDirs lists the folders tried after the sonames, where the file
// exists: $NCCL_HOME, $CUDA_HOME and $CUDA_PATH, the CUDA toolkits, and
// the distribution's library folders.
func libDirs() []string {
	return append(dl.ToolkitDirs("NCCL_HOME", "CUDA_HOME", "CUDA_PATH"), "/usr/lib/"+archTriplet(), "/usr/lib64", "/usr/local/lib")
}

func archTriplet() string { return dl.ArchTriplet() }

// loadError is a failed discovery (internal/dl's, shared with package
// cuda).
type loadError = dl.LoadError

// openLibrary finds and loads libnccl, returning its handle and the path
// that worked. getenv is os.Getenv outside tests; dirs the folders to
// search after the sonames.
func openLibrary(getenv func(string) string, names, dirs []string) (uintptr, string, error) {
	return dl.Find(dl.Spec{Pkg: "nccl", What: "NCCL (libnccl)", Env: EnvNCCLLib, Names: names, Dirs: dirs, Fix: fix, Kind: ErrNotAvailable}, getenv, dlopen)
}

// symbol is one resolved C function: its address and its name (for
// error messages). A zero addr marks an optional symbol the loaded
// library lacks.
type symbol struct {
	name string
	addr uintptr
}

// lib is the loaded libnccl.
type lib struct {
	path    string
	version int // ncclGetVersion

	getVersion, getUniqueID, commInitRank, commInitAll, commDestroy symbol
	commCount, commCuDevice, commUserRank                           symbol
	allReduce, reduceScatter, allGather, broadcast                  symbol
	groupStart, groupEnd, getErrorString                            symbol

	getLastError, commGetAsyncError, commAbort symbol // optional (2.13+, 2.4+, 2.4+)
}

func (l *lib) symbols() (required, optional []*symbol) {
	set := func(s *symbol, name string) *symbol { s.name = name; return s }
	required = []*symbol{
		set(&l.getVersion, "ncclGetVersion"),
		set(&l.getUniqueID, "ncclGetUniqueId"),
		set(&l.commInitRank, "ncclCommInitRank"),
		set(&l.commInitAll, "ncclCommInitAll"),
		set(&l.commDestroy, "ncclCommDestroy"),
		set(&l.commCount, "ncclCommCount"),
		set(&l.commCuDevice, "ncclCommCuDevice"),
		set(&l.commUserRank, "ncclCommUserRank"),
		set(&l.allReduce, "ncclAllReduce"),
		set(&l.reduceScatter, "ncclReduceScatter"),
		set(&l.allGather, "ncclAllGather"),
		set(&l.broadcast, "ncclBroadcast"),
		set(&l.groupStart, "ncclGroupStart"),
		set(&l.groupEnd, "ncclGroupEnd"),
		set(&l.getErrorString, "ncclGetErrorString"),
	}
	optional = []*symbol{
		set(&l.getLastError, "ncclGetLastError"),
		set(&l.commGetAsyncError, "ncclCommGetAsyncError"),
		set(&l.commAbort, "ncclCommAbort"),
	}
	return required, optional
}

// load finds libnccl, resolves its symbols and reads its version.
func load(getenv func(string) string, dirs []string) (*lib, error) {
	h, path, err := openLibrary(getenv, libNames, dirs)
	if err != nil {
		return nil, err
	}
	l := &lib{path: path}
	required, optional := l.symbols()
	var missing []string
	for _, s := range required {
		if a, err := dlsym(h, s.name); err == nil && a != 0 {
			s.addr = a
		} else {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("nccl: %s is not NCCL 2.x: it lacks %s: %s: %w",
			path, strings.Join(missing, ", "), fix, ErrNotAvailable)
	}
	for _, s := range optional {
		s.addr, _ = dlsym(h, s.name)
	}
	var v int32
	if r := Result(ccall(l.getVersion.addr, uintptr(unsafe.Pointer(&v)))); r != Success {
		// A library that cannot tell its version is not one to use: the
		// error wraps ErrNotAvailable, as every other load failure does
		// (Init's word), and the *Error with NCCL's code.
		return nil, fmt.Errorf("nccl: %s loaded, but %w: %w", path, l.newError(l.getVersion.name, "", r, 0), ErrNotAvailable)
	}
	l.version = int(v)
	return l, nil
}

var state struct {
	once sync.Once
	lib  *lib
	err  error
}

// getLib loads NCCL on first use, once per process, and returns the
// first outcome on every later call (from any goroutine).
func getLib() (*lib, error) {
	state.once.Do(func() { state.lib, state.err = load(os.Getenv, libDirs()) })
	return state.lib, state.err
}

// Init loads NCCL. Every other function calls it, so calling it only
// moves the cost and lets a program report a missing library early. The
// error wraps ErrNotAvailable and lists every file tried.
func Init() error {
	_, err := getLib()
	return err
}

// Available reports whether NCCL loads.
func Available() bool { return Init() == nil }

// LibraryPath returns the file NCCL was loaded from.
func LibraryPath() (string, error) {
	l, err := getLib()
	if err != nil {
		return "", err
	}
	return l.path, nil
}

// Version returns NCCL's version code, as ncclGetVersion reports it:
// major*10000 + minor*100 + patch since 2.9 (22304 for 2.23.4), and
// major*1000 + minor*100 + patch before.
func Version() (int, error) {
	l, err := getLib()
	if err != nil {
		return 0, err
	}
	return l.version, nil
}

// VersionString renders a version code (22304) as "2.23.4".
func VersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// addrPointer is internal/dl's.
func addrPointer(addr uintptr) unsafe.Pointer { return dl.Pointer(addr) }
