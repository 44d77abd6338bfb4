package memory

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
)

// NewCUDAManager makes the hybrid memory manager of ctx's device: pooled
// device memory (NewDeviceBackend), managed memory (NewManagedBackend),
// mapped page-locked staging memory (NewStagingBackend, not
// write-combined), host-resident managed memory for the offload tier
// (NewPinnedOffloadBackend with its default limit: mapped page-locked
// memory; NewOffloadBackend's host-preferring managed memory when the
// environment variable STRATA_OFFLOAD_MEMORY is "managed") and plain host
// memory (NewHostBackend) for TierHost, with
// cfg.Policy (the hybrid policy when zero). A device without managed
// memory gets no managed or offload backend, and one that cannot map host memory no
// staging backend: those tiers fall back as the fallback chain says.
//
// cfg.StreamSync tells the pools when work on a stream has finished
// (Manager.RecordStream); when it is nil the manager makes a CUDAStreams
// of its own and destroys its events on Close. Pass your own CUDAStreams
// to register streams other than the default one (CUDAStreams.Stream): the
// managed backend also uses it to order prefetches on the allocation's
// stream. A StreamSync of another kind is used for the pools, and then
// prefetches can only use the default stream.
func NewCUDAManager(ctx *cuda.Context, cfg Config) (*Manager, error) {
	if ctx == nil {
		return nil, fmt.Errorf("memory: NewCUDAManager: nil *cuda.Context: %w", ErrInvalidArgument)
	}
	if cfg.PlanSteps == PlanDefault {
		cfg.PlanSteps = planCUDADefault // the device tier plans unless STRATA_PLAN_STEPS=0
	}
	var owned *CUDAStreams
	if cfg.StreamSync == nil {
		owned = NewCUDAStreams(ctx)
		cfg.StreamSync = owned
	}
	streams, _ := cfg.StreamSync.(*CUDAStreams)
	if streams != nil && streams.ctx != ctx {
		return nil, fmt.Errorf("memory: NewCUDAManager for %s: its CUDAStreams belongs to %s: %w", ctx.Device(), streams.ctx.Device(), ErrInvalidArgument)
	}

	env := os.Getenv(EnvOffloadMemory)
	pinned, err := offloadPinned(env)
	if err != nil {
		return nil, err
	}
	props := ctx.Properties()
	if pinned && !props.CanMapHostMemory && env != "" {
		return nil, fmt.Errorf("memory: %s=pinned: %s cannot map host memory: %w", EnvOffloadMemory, ctx.Device(), ErrInvalidArgument)
	}
	backends := []Backend{NewDeviceBackend(ctx), NewHostBackend(TierHost)}
	if props.ManagedMemory {
		mb := NewManagedBackend(ctx).(*managedBackend)
		mb.streams = streams
		backends = append(backends, mb)
	}
	switch {
	case pinned && props.CanMapHostMemory:
		backends = append(backends, NewPinnedOffloadBackend(ctx, 0))
	case props.ManagedMemory:
		backends = append(backends, NewOffloadBackend(ctx, 0))
	}
	if props.CanMapHostMemory {
		backends = append(backends, NewStagingBackend(ctx, false))
	}
	m, err := NewManager(backends, cfg)
	if err != nil {
		return nil, err
	}
	if owned != nil {
		m.owned = append(m.owned, owned.Close)
	}
	m.copyFn = func(dst, src uintptr, n int64, s Stream) error {
		st, err := cudaStream(streams, s)
		if err != nil {
			return err
		}
		return ctx.MemcpyDtoDAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), int(n), st)
	}
	m.pinned = &pinnedCopier{
		// The staging tier, and the offload tier over mapped pinned memory.
		pinned: [NumTiers]bool{TierStaging: props.CanMapHostMemory, TierOffload: pinned && props.CanMapHostMemory},
		toDevice: func(dst uintptr, src unsafe.Pointer, n int64, s Stream) error {
			st, err := cudaStream(streams, s)
			if err != nil {
				return err
			}
			return ctx.MemcpyHtoDAsyncPtr(cuda.DevicePtr(dst), src, int(n), st)
		},
		toHost: func(dst unsafe.Pointer, src uintptr, n int64, s Stream) error {
			st, err := cudaStream(streams, s)
			if err != nil {
				return err
			}
			return ctx.MemcpyDtoHAsyncPtr(dst, cuda.DevicePtr(src), int(n), st)
		},
	}
	return m, nil
}

// cudaStream is the *cuda.Stream of memory stream s (nil: the default
// stream, for 0).
func cudaStream(streams *CUDAStreams, s Stream) (*cuda.Stream, error) {
	if s == 0 {
		return nil, nil
	}
	if streams == nil {
		return nil, fmt.Errorf("memory: copy on stream %#x without the CUDA manager's CUDAStreams: %w", uintptr(s), ErrInvalidArgument)
	}
	return streams.CUDA(s)
}
