//go:build unix && !linux

package memory

// pageFile is the page identity of host_vm_file_linux.go; without memfd
// the host backend maps anonymous memory at each place.
type pageFile struct{ fd int }

func (f *pageFile) open() bool                       { return false }
func (f *pageFile) create() (int64, error)           { return 0, nil }
func (f *pageFile) release(off int64) error          { return nil }
func (f *pageFile) mapAt(at []byte, off int64) error { return nil }
func (f *pageFile) unmapAt(at []byte) error          { return nil }
