package main

import (
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// The data loader draws the next batch on a goroutine of its own while the
// current step runs (double buffering): two batch slots go round between
// it and the training loop, one being trained on while the other is
// filled. A slot is handed back only after the step that used it has
// returned (its kernels done: the step reads the loss, which waits for
// them), so the loader never writes a batch a step may still read.
//
// The batches are drawn in order from the trainer's data generator, as
// the loop without a loader drew them, so a seed gives the same batches.
// The generator runs ahead of training by one batch; each slot carries
// the generator's state after its batch, and the training state saves
// that of the last batch trained on (trainer.dataPos), so a resumed run
// draws exactly the batches that follow.
//
// Where the role staging is host-accessible (the CPU; on the GPU, mapped
// pinned host memory under the hybrid policy), a slot's batch is two
// int32 (B, T) tensors of that role, kept for the run, which the loader
// writes in place: the step reads them with no upload. Elsewhere (the
// staging role placed in device memory by -policy) the loader fills host
// slices and the step uploads them, as without a loader.
type loader struct {
	free, ready chan *slot
	done        chan struct{}
	finished    chan struct{}
	slots       [2]*slot
}

// slot is one batch: its tokens (host slices, views of x and y when they
// are host-accessible) and the data generator's state after it.
type slot struct {
	xs, ys []int32
	x, y   *tensor.Tensor // nil: upload xs, ys in the step
	rng    []byte
	err    error
}

// startLoader allocates the slots and starts drawing batches of data from
// t's generator.
func startLoader(t *trainer, data dataset) (*loader, error) {
	l := &loader{free: make(chan *slot, 2), ready: make(chan *slot, 2), done: make(chan struct{}), finished: make(chan struct{})}
	for i := range l.slots {
		s, err := newSlot(t.dev, t.B, t.T)
		if err != nil {
			l.release()
			return nil, err
		}
		l.slots[i] = s
		l.free <- s
	}
	go l.run(t.dataSrc, t.rng, data, t.B, t.T)
	return l, nil
}

func newSlot(dev tensor.Device, B, T int) (*slot, error) {
	s := &slot{}
	var err error
	if s.x, err = tensor.NewKept(dev, tensor.Int32, memory.RoleStaging, B, T); err != nil {
		return nil, fmt.Errorf("data loader: %w", err)
	}
	if s.y, err = tensor.NewKept(dev, tensor.Int32, memory.RoleStaging, B, T); err != nil {
		s.x.Release()
		return nil, fmt.Errorf("data loader: %w", err)
	}
	s.x.SetLabel("batch inputs (loader)")
	s.y.SetLabel("batch targets (loader)")
	xh, yh := s.x.Allocation().Host(), s.y.Allocation().Host()
	if len(xh) == 4*B*T && len(yh) == 4*B*T {
		s.xs = unsafe.Slice((*int32)(unsafe.Pointer(&xh[0])), B*T)
		s.ys = unsafe.Slice((*int32)(unsafe.Pointer(&yh[0])), B*T)
		return s, nil
	}
	s.x.Release()
	s.y.Release()
	s.x, s.y = nil, nil
	s.xs, s.ys = make([]int32, B*T), make([]int32, B*T)
	return s, nil
}

func (l *loader) run(src *rand.PCG, rng *rand.Rand, data dataset, B, T int) {
	defer close(l.finished)
	for {
		var s *slot
		select {
		case s = <-l.free:
		case <-l.done:
			return
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					s.err = fmt.Errorf("data loader: %v", p)
				}
			}()
			data.batch(rng, s.xs, s.ys, B, T)
			s.rng, s.err = src.MarshalBinary()
		}()
		select {
		case l.ready <- s:
		case <-l.done:
			return
		}
		if s.err != nil {
			return
		}
	}
}

// next returns the next batch; give it back with put once its step has
// returned.
func (l *loader) next() (*slot, error) {
	s := <-l.ready
	return s, s.err
}

func (l *loader) put(s *slot) { l.free <- s }

// stop ends the loader and releases the slots.
func (l *loader) stop() {
	close(l.done)
	<-l.finished
	l.release()
}

func (l *loader) release() {
	for _, s := range l.slots {
		if s != nil && s.x != nil {
			s.x.Release()
			s.y.Release()
		}
	}
}
