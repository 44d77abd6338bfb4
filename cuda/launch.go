package cuda

import (
	"fmt"
	"runtime"
	"sync"
)

// checkLaunch validates a launch configuration against the device limits
// read when the context was retained, so mistakes get a message naming
// the limit instead of a bare CUDA_ERROR_INVALID_VALUE.
func (c *Context) checkLaunch(fn *Function, grid, block [3]uint32, sharedMem int) error {
	if err := fn.usable("LaunchKernel"); err != nil {
		return err
	}
	if fn.mod.ctx != c {
		return invalidArg("LaunchKernel", "kernel %s was loaded in %s, not %s", fn.name, fn.mod.ctx.dev, c.dev)
	}
	p := &c.props
	threads := uint64(1)
	for i, axis := range [3]string{"x", "y", "z"} {
		if grid[i] == 0 || block[i] == 0 {
			return invalidArg("LaunchKernel", "kernel %s: grid %v and block %v must be at least 1 on every axis", fn.name, grid, block)
		}
		if int(grid[i]) > p.MaxGridDim[i] {
			return invalidArg("LaunchKernel", "kernel %s: grid %s = %d exceeds %d on %s", fn.name, axis, grid[i], p.MaxGridDim[i], c.dev)
		}
		if int(block[i]) > p.MaxBlockDim[i] {
			return invalidArg("LaunchKernel", "kernel %s: block %s = %d exceeds %d on %s", fn.name, axis, block[i], p.MaxBlockDim[i], c.dev)
		}
		threads *= uint64(block[i])
	}
	if threads > uint64(p.MaxThreadsPerBlock) {
		return invalidArg("LaunchKernel", "kernel %s: block %v has %d threads, %s allows %d", fn.name, block, threads, c.dev, p.MaxThreadsPerBlock)
	}
	if sharedMem < 0 || sharedMem > p.MaxSharedMemOptIn {
		return invalidArg("LaunchKernel", "kernel %s: %d bytes of dynamic shared memory, %s allows 0 to %d", fn.name, sharedMem, c.dev, p.MaxSharedMemOptIn)
	}
	return nil
}

// LaunchKernelArgs launches fn on grid x block threads with sharedMem
// bytes of dynamic shared memory, ordered on stream s (nil: the default
// stream), with the arguments in a. It makes one driver call
// (cuLaunchKernel) and allocates nothing; a launch error that surfaces
// only when the kernel runs is reported by a later synchronisation.
func (c *Context) LaunchKernelArgs(fn *Function, grid, block [3]uint32, sharedMem int, s *Stream, a *Args) error {
	if err := c.checkLaunch(fn, grid, block, sharedMem); err != nil {
		return err
	}
	if a == nil {
		return invalidArg("LaunchKernel", "kernel %s: nil argument list", fn.name)
	}
	if a.err != nil {
		return a.err
	}
	if a.block == nil {
		return invalidArg("LaunchKernel", "kernel %s: argument list used after Free", fn.name)
	}
	if err := a.checkParams(fn); err != nil {
		return err
	}
	sh, err := c.streamHandle("LaunchKernel", s)
	if err != nil {
		return err
	}
	f := getFrame()
	st := c.invoke(f, c.drv.launchKernel, fn.h,
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(sharedMem), sh, uintptr(a.block), 0)
	f.release()
	// The argument block must outlive the call: keep a (and so its
	// cleanup, which would free the block) alive until here.
	runtime.KeepAlive(a)
	if !st.ok() {
		return st.err(fmt.Sprintf("kernel %s, grid %v, block %v, %d bytes shared, %s", fn.name, grid, block, sharedMem, s))
	}
	return nil
}

var argsPool sync.Pool

// LaunchKernel is LaunchKernelArgs with the arguments given as Go values
// (see Args.Add for the accepted types). Boxing the values into ...any
// allocates; launchers on a hot path keep an *Args and call
// LaunchKernelArgs.
func (c *Context) LaunchKernel(fn *Function, grid, block [3]uint32, sharedMem int, s *Stream, args ...any) error {
	a, _ := argsPool.Get().(*Args)
	if a == nil {
		var err error
		if a, err = NewArgs(); err != nil {
			return err
		}
	}
	a.Reset()
	for _, v := range args {
		a.Add(v)
	}
	err := c.LaunchKernelArgs(fn, grid, block, sharedMem, s, a)
	argsPool.Put(a)
	return err
}
