package cuda

import (
	"sync"
	"unsafe"
)

// Kernel argument blocks. cuLaunchKernel takes void** kernelParams: an
// array of pointers, one per parameter, each to the parameter's value.
// That array holds pointers, so under the cgo rules it and the values must
// be C memory or pinned Go memory. A runtime.Pinner would panic at garbage
// collection if an Args were dropped without being freed (and pooled
// objects are dropped), so the blocks live in memory mapped outside the Go
// heap instead: each block is a pointer array followed by the values it
// points to, and is handed out, returned and reused through a free list.

const (
	// MaxKernelArgs is the most arguments one launch takes.
	MaxKernelArgs = 512
	// MaxKernelArgBytes bounds the total size of a launch's argument
	// values: the classic CUDA limit of 4 KiB.
	MaxKernelArgBytes = 4096

	argPtrBytes    = MaxKernelArgs * 8
	argBlockBytes  = argPtrBytes + MaxKernelArgBytes // 8 KiB
	argChunkBlocks = 32                              // 256 KiB mapped at a time
)

var argArena struct {
	mu   sync.Mutex
	free []unsafe.Pointer
}

// allocArgBlock returns an argument block outside the Go heap.
func allocArgBlock() (unsafe.Pointer, error) {
	argArena.mu.Lock()
	defer argArena.mu.Unlock()
	if len(argArena.free) == 0 {
		chunk, err := mapChunk(argBlockBytes * argChunkBlocks)
		if err != nil {
			return nil, &argError{op: "NewArgs", msg: "mapping memory for kernel arguments: " + err.Error(), kind: ErrOutOfMemory}
		}
		for i := range argChunkBlocks {
			argArena.free = append(argArena.free, unsafe.Add(chunk, i*argBlockBytes))
		}
	}
	p := argArena.free[len(argArena.free)-1]
	argArena.free = argArena.free[:len(argArena.free)-1]
	return p, nil
}

// freeArgBlock returns a block to the free list. Chunks are never unmapped:
// the arena only grows to the peak number of live Args.
func freeArgBlock(p unsafe.Pointer) {
	argArena.mu.Lock()
	argArena.free = append(argArena.free, p)
	argArena.mu.Unlock()
}
