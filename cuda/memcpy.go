package cuda

import (
	"fmt"
	"unsafe"
)

// Copies. Host memory is given either as a []byte or as an unsafe.Pointer
// and a length. Go memory is fine for both: it stays valid for the call.
// The asynchronous forms return before the copy ends only when the host
// memory is page-locked (MemHostAlloc); the driver stages pageable memory
// and returns when it may be reused (HtoD) or holds the data (DtoH). Keep
// page-locked buffers alive and untouched until the stream has passed the
// copy. A zero-length copy does nothing.

// checkCopy validates a copy of n bytes: dev is its device address, and
// other says whether the other side (host memory, or the source of a
// device-to-device copy, named otherName) is given.
func checkCopy(op string, dev DevicePtr, other bool, otherName string, n int) error {
	if n < 0 {
		return invalidArg(op, "negative length %d", n)
	}
	if n == 0 {
		return nil
	}
	if dev == 0 {
		return invalidArg(op, "nil device pointer for %d bytes", n)
	}
	if !other {
		return invalidArg(op, "nil %s pointer for %d bytes", otherName, n)
	}
	return nil
}

func copyDetail(n int, dir string, p DevicePtr) string {
	return fmt.Sprintf("%d bytes %s %s", n, dir, p)
}

// MemcpyHtoD copies src to device memory at dst and returns when done.
func (c *Context) MemcpyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.MemcpyHtoDPtr(dst, unsafe.Pointer(&src[0]), len(src))
}

// MemcpyHtoDPtr copies n bytes from host memory at src to dst.
func (c *Context) MemcpyHtoDPtr(dst DevicePtr, src unsafe.Pointer, n int) error {
	if err := checkCopy("MemcpyHtoD", dst, src != nil, "host", n); err != nil || n == 0 {
		return err
	}
	if s := c.invokeGo(c.drv.memcpyHtoD, uintptr(dst), uintptr(src), uintptr(n)); !s.ok() {
		return s.err(copyDetail(n, "to", dst))
	}
	return nil
}

// MemcpyDtoH copies len(dst) bytes from device memory at src into dst.
func (c *Context) MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.MemcpyDtoHPtr(unsafe.Pointer(&dst[0]), src, len(dst))
}

// MemcpyDtoHPtr copies n bytes from src to host memory at dst.
func (c *Context) MemcpyDtoHPtr(dst unsafe.Pointer, src DevicePtr, n int) error {
	if err := checkCopy("MemcpyDtoH", src, dst != nil, "host", n); err != nil || n == 0 {
		return err
	}
	if s := c.invokeGo(c.drv.memcpyDtoH, uintptr(dst), uintptr(src), uintptr(n)); !s.ok() {
		return s.err(copyDetail(n, "from", src))
	}
	return nil
}

// MemcpyDtoD copies n bytes between device addresses.
func (c *Context) MemcpyDtoD(dst, src DevicePtr, n int) error {
	if err := checkCopy("MemcpyDtoD", dst, src != 0, "source device", n); err != nil || n == 0 {
		return err
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memcpyDtoD, uintptr(dst), uintptr(src), uintptr(n)); !s.ok() {
		return s.err(fmt.Sprintf("%d bytes from %s to %s", n, src, dst))
	}
	return nil
}

// MemcpyHtoDAsync copies src to dst, ordered on stream s.
func (c *Context) MemcpyHtoDAsync(dst DevicePtr, src []byte, s *Stream) error {
	if len(src) == 0 {
		return nil
	}
	return c.MemcpyHtoDAsyncPtr(dst, unsafe.Pointer(&src[0]), len(src), s)
}

// MemcpyHtoDAsyncPtr copies n bytes from host memory at src to dst,
// ordered on stream s.
func (c *Context) MemcpyHtoDAsyncPtr(dst DevicePtr, src unsafe.Pointer, n int, s *Stream) error {
	if err := checkCopy("MemcpyHtoDAsync", dst, src != nil, "host", n); err != nil || n == 0 {
		return err
	}
	sh, err := c.streamHandle("MemcpyHtoDAsync", s)
	if err != nil {
		return err
	}
	if st := c.invokeGo(c.drv.memcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), sh); !st.ok() {
		return st.err(copyDetail(n, "to", dst) + ", " + s.String())
	}
	return nil
}

// MemcpyDtoHAsync copies len(dst) bytes from src into dst, ordered on
// stream s.
func (c *Context) MemcpyDtoHAsync(dst []byte, src DevicePtr, s *Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return c.MemcpyDtoHAsyncPtr(unsafe.Pointer(&dst[0]), src, len(dst), s)
}

// MemcpyDtoHAsyncPtr copies n bytes from src to host memory at dst,
// ordered on stream s.
func (c *Context) MemcpyDtoHAsyncPtr(dst unsafe.Pointer, src DevicePtr, n int, s *Stream) error {
	if err := checkCopy("MemcpyDtoHAsync", src, dst != nil, "host", n); err != nil || n == 0 {
		return err
	}
	sh, err := c.streamHandle("MemcpyDtoHAsync", s)
	if err != nil {
		return err
	}
	if st := c.invokeGo(c.drv.memcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), sh); !st.ok() {
		return st.err(copyDetail(n, "from", src) + ", " + s.String())
	}
	return nil
}

// MemcpyDtoDAsync copies n bytes between device addresses, ordered on
// stream s.
func (c *Context) MemcpyDtoDAsync(dst, src DevicePtr, n int, s *Stream) error {
	if err := checkCopy("MemcpyDtoDAsync", dst, src != 0, "source device", n); err != nil || n == 0 {
		return err
	}
	sh, err := c.streamHandle("MemcpyDtoDAsync", s)
	if err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := c.invoke(f, c.drv.memcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), sh); !st.ok() {
		return st.err(fmt.Sprintf("%d bytes from %s to %s, %s", n, src, dst, s))
	}
	return nil
}

// MemsetD8 sets n bytes at p to v.
func (c *Context) MemsetD8(p DevicePtr, v byte, n int) error {
	return c.memset("MemsetD8", c.drv.memsetD8, p, uintptr(v), n, 1, nil, false)
}

// MemsetD32 sets n 32-bit words at p (4-byte aligned) to v.
func (c *Context) MemsetD32(p DevicePtr, v uint32, n int) error {
	return c.memset("MemsetD32", c.drv.memsetD32, p, uintptr(v), n, 4, nil, false)
}

// MemsetD8Async sets n bytes at p to v, ordered on stream s.
func (c *Context) MemsetD8Async(p DevicePtr, v byte, n int, s *Stream) error {
	return c.memset("MemsetD8Async", c.drv.memsetD8Async, p, uintptr(v), n, 1, s, true)
}

// MemsetD32Async sets n 32-bit words at p (4-byte aligned) to v, ordered
// on stream s.
func (c *Context) MemsetD32Async(p DevicePtr, v uint32, n int, s *Stream) error {
	return c.memset("MemsetD32Async", c.drv.memsetD32Async, p, uintptr(v), n, 4, s, true)
}

func (c *Context) memset(op string, sym symbol, p DevicePtr, v uintptr, n, width int, s *Stream, async bool) error {
	if n < 0 {
		return invalidArg(op, "negative count %d", n)
	}
	if n == 0 {
		return nil
	}
	if p == 0 {
		return invalidArg(op, "nil device pointer for %d elements", n)
	}
	if uintptr(p)%uintptr(width) != 0 {
		return invalidArg(op, "pointer %s is not %d-byte aligned", p, width)
	}
	f := getFrame()
	defer f.release()
	var st status
	if async {
		sh, err := c.streamHandle(op, s)
		if err != nil {
			return err
		}
		st = c.invoke(f, sym, uintptr(p), v, uintptr(n), sh)
	} else {
		st = c.invoke(f, sym, uintptr(p), v, uintptr(n))
	}
	if !st.ok() {
		return st.err(fmt.Sprintf("%d elements of %d bytes at %s", n, width, p))
	}
	return nil
}
