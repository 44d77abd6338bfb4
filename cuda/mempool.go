package cuda

import "fmt"

// CUmemPool_attribute values used here.
const (
	memPoolAttrReleaseThreshold   = 4
	memPoolAttrReservedMemCurrent = 5
	memPoolAttrUsedMemCurrent     = 7
)

// defaultMemPool returns the device's default pool, the one MemAllocAsync
// draws from.
func (c *Context) defaultMemPool(op string, f *frame) (uintptr, error) {
	for _, sym := range []symbol{c.drv.deviceGetDefaultMemPool, c.drv.memPoolGetAttribute, c.drv.memPoolSetAttribute, c.drv.memPoolTrimTo} {
		if sym.addr == 0 {
			return 0, c.missing(op, sym)
		}
	}
	_, h, err := c.dev.handle()
	if err != nil {
		return 0, err
	}
	if s := c.invoke(f, c.drv.deviceGetDefaultMemPool, f.outAddr(0), h); !s.ok() {
		return 0, s.err(c.dev.String())
	}
	return uintptr(f.out[0]), nil
}

// SetMemPoolReleaseThreshold sets how many bytes the default pool keeps
// reserved across synchronisations instead of returning them to the
// driver. The default, 0, makes every synchronize release freed memory,
// so the next MemAllocAsync pays for a fresh mapping; a large threshold
// turns the pool into a cache.
func (c *Context) SetMemPoolReleaseThreshold(bytes uint64) error {
	f := getFrame()
	defer f.release()
	pool, err := c.defaultMemPool("SetMemPoolReleaseThreshold", f)
	if err != nil {
		return err
	}
	f.out[1] = bytes
	if s := c.invoke(f, c.drv.memPoolSetAttribute, pool, memPoolAttrReleaseThreshold, f.outAddr(1)); !s.ok() {
		return s.err(fmt.Sprintf("release threshold %d bytes on %s", bytes, c.dev))
	}
	return nil
}

// MemPoolUsage returns the bytes the default pool holds from the driver
// (reserved) and the bytes of it handed out by MemAllocAsync (used).
func (c *Context) MemPoolUsage() (reserved, used uint64, err error) {
	f := getFrame()
	defer f.release()
	pool, err := c.defaultMemPool("MemPoolUsage", f)
	if err != nil {
		return 0, 0, err
	}
	if s := c.invoke(f, c.drv.memPoolGetAttribute, pool, memPoolAttrReservedMemCurrent, f.outAddr(1)); !s.ok() {
		return 0, 0, s.err("reserved bytes on " + c.dev.String())
	}
	if s := c.invoke(f, c.drv.memPoolGetAttribute, pool, memPoolAttrUsedMemCurrent, f.outAddr(2)); !s.ok() {
		return 0, 0, s.err("used bytes on " + c.dev.String())
	}
	return f.out[1], f.out[2], nil
}

// MemPoolTrimTo releases reserved but unused memory of the default pool
// until at most keep bytes remain reserved.
func (c *Context) MemPoolTrimTo(keep uint64) error {
	f := getFrame()
	defer f.release()
	pool, err := c.defaultMemPool("MemPoolTrimTo", f)
	if err != nil {
		return err
	}
	if s := c.invoke(f, c.drv.memPoolTrimTo, pool, uintptr(keep)); !s.ok() {
		return s.err(fmt.Sprintf("keep %d bytes on %s", keep, c.dev))
	}
	return nil
}
