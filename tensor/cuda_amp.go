package tensor

import (
	"encoding/binary"

	"github.com/strata-ml/strata/cuda"
)

// unscaleCheck launches kernels/amp.cuh's unscale_check_f32 once for up
// to maxGridYZ tensors (unscaleLaunch); reading the found flag back is
// the step's one synchronization.
func (b cudaBackend) unscaleCheck(ts []*Tensor, inv float64) bool {
	d := b.d
	found := full("UnscaleGrads", nil, d, Int32, 0, 1)
	defer found.Release()
	b.unscaleLaunch("UnscaleGrads", ts, inv, found)
	var flag [4]byte
	if err := d.Synchronize(); err != nil {
		fail("UnscaleGrads", err, "synchronizing %v", d)
	}
	b.download(flag[:], found)
	return binary.LittleEndian.Uint32(flag[:]) == 0
}

// scaleAll is the same launch with the flag unread: nothing waits.
func (b cudaBackend) scaleAll(ts []*Tensor, alpha float64) {
	found := full("ScaleAll", nil, b.d, Int32, 0, 1)
	defer found.Release() // the stream orders its reuse after the kernel
	b.unscaleLaunch("ScaleAll", ts, alpha, found)
}

// unscaleLaunch queues unscale_check_f32 over ts (tensorTableLaunch):
// any non-finite element sets the int32 found.
func (b cudaBackend) unscaleLaunch(op string, ts []*Tensor, inv float64, found *Tensor) {
	b.tensorTableLaunch(op, b.d.k.unscaleCheck, ts, func(a *cuda.Args, tab cuda.DevicePtr) {
		a.Ptr(tab).Float32(float32(inv)).Ptr(devPtr(found))
	})
}

// tensorTableLaunch launches fn over the tensors ts, up to maxGridYZ a
// launch: their addresses and element counts go up in one small table
// (argTable), blockIdx.y picks the tensor and the x blocks stride over
// its elements; set appends the arguments after the table's address
// (unscale_check_f32, scale_guarded_f32, unscale_guarded_f32).
func (b cudaBackend) tensorTableLaunch(op string, fn *cuda.Function, ts []*Tensor, set func(a *cuda.Args, tab cuda.DevicePtr)) {
	d := b.d
	for len(ts) > 0 {
		chunk := ts[:min(len(ts), maxGridYZ)]
		ts = ts[len(chunk):]
		rows := make([]byte, 0, 16*len(chunk))
		maxN := 0
		for _, t := range chunk {
			rows = binary.LittleEndian.AppendUint64(rows, uint64(devPtr(t)))
			rows = binary.LittleEndian.AppendUint64(rows, uint64(t.Numel()))
			maxN = max(maxN, t.Numel())
		}
		if maxN == 0 {
			continue
		}
		grid := [3]uint32{uint32(min(ceilDiv(maxN, blockThreads), 1024)), uint32(len(chunk)), 1}
		d.launchTable(op, fn, grid, rows, set)
	}
}
