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

// unscaleLaunch queues unscale_check_f32 over ts, up to maxGridYZ tensors
// a launch: their addresses and sizes go up in one small table, and any
// non-finite element sets the int32 found.
func (b cudaBackend) unscaleLaunch(op string, ts []*Tensor, inv float64, found *Tensor) {
	d := b.d
	for len(ts) > 0 {
		chunk := ts[:min(len(ts), maxGridYZ)]
		ts = ts[len(chunk):]
		buf := make([]byte, 16*len(chunk))
		maxN := 0
		for j, t := range chunk {
			binary.LittleEndian.PutUint64(buf[16*j:], uint64(devPtr(t)))
			binary.LittleEndian.PutUint64(buf[16*j+8:], uint64(t.Numel()))
			maxN = max(maxN, t.Numel())
		}
		if maxN == 0 {
			continue
		}
		table := mustNew(op, nil, d, Int32, []int{4 * len(chunk)})
		b.upload(table, buf)
		grid := [3]uint32{uint32(min(ceilDiv(maxN, blockThreads), 1024)), uint32(len(chunk)), 1}
		d.launch(op, d.k.unscaleCheck, grid, block1, func(a *cuda.Args) {
			a.Ptr(devPtr(table)).Float32(float32(inv)).Ptr(devPtr(found))
		})
		table.Release() // the stream orders its reuse after the kernel
	}
}
