package tensor

import (
	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// newCUDAManager builds a device's hybrid memory manager
// (memory.NewCUDAManager: pooled device memory, managed memory with advice
// and prefetch, mapped pinned staging memory, host memory) with the
// device's stream registered, so that pool blocks are cached for that
// stream and managed-memory prefetches are ordered on it. The side
// stream registers with the same CUDAStreams (cuda_side.go).
func newCUDAManager(ctx *cuda.Context, stream *cuda.Stream) (*memory.Manager, *memory.CUDAStreams, memory.Stream, error) {
	streams := memory.NewCUDAStreams(ctx)
	s, err := streams.Stream(stream)
	if err != nil {
		streams.Close()
		return nil, nil, 0, err
	}
	m, err := memory.NewCUDAManager(ctx, memory.Config{StreamSync: streams})
	if err != nil {
		streams.Close()
		return nil, nil, 0, err
	}
	return m, streams, s, nil
}

// memStream is the pool stream the device's tensors are allocated on:
// the device stream's, or while a graph is captured its private pool.
func (d *cudaDevice) memStream() memory.Stream {
	if c := d.capturing(); c != nil {
		return c.pool
	}
	return d.memS
}
