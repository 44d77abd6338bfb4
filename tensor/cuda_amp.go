package tensor

import (
	"encoding/binary"

	"github.com/strata-ml/strata/cuda"
)

// unscaleCheck launches kernels/amp.cuh's unscale_check_f32 once for up
// to maxGridYZ tensors: their addresses and sizes go up in one small
// table, the found flag is one int32 zeroed on the stream, and reading it
// back is the step's one synchronization.
func (b cudaBackend) unscaleCheck(ts []*Tensor, inv float64) bool {
	d := b.d
	found := full("UnscaleGrads", nil, d, Int32, 0, 1)
	defer found.Release()
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
		table := mustNew("UnscaleGrads", nil, d, Int32, []int{4 * len(chunk)})
		b.upload(table, buf)
		grid := [3]uint32{uint32(min(ceilDiv(maxN, blockThreads), 1024)), uint32(len(chunk)), 1}
		d.launch("UnscaleGrads", d.k.unscaleCheck, grid, block1, func(a *cuda.Args) {
			a.Ptr(devPtr(table)).Float32(float32(inv)).Ptr(devPtr(found))
		})
		table.Release() // the stream orders its reuse after the kernel
	}
	var flag [4]byte
	if err := d.Synchronize(); err != nil {
		fail("UnscaleGrads", err, "synchronizing %v", d)
	}
	b.download(flag[:], found)
	return binary.LittleEndian.Uint32(flag[:]) == 0
}
