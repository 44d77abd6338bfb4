package cuda

import "fmt"

// LocationType is a CUmemLocationType: where managed memory should live
// or who accesses it.
type LocationType int32

const (
	// LocationDevice is a GPU; Location.ID is its ordinal.
	LocationDevice LocationType = 1
	// LocationHost is host memory; Location.ID is ignored.
	LocationHost LocationType = 2
	// LocationHostNUMA is host memory of one NUMA node, Location.ID.
	LocationHostNUMA LocationType = 3
	// LocationHostNUMACurrent is host memory of the calling thread's NUMA
	// node; Location.ID is ignored.
	LocationHostNUMACurrent LocationType = 4
)

// Location is a CUmemLocation, the target of MemAdvise and
// MemPrefetchAsync.
type Location struct {
	Type LocationType
	ID   int
}

// DeviceLocation is the memory of device dev.
func DeviceLocation(dev Device) Location { return Location{Type: LocationDevice, ID: int(dev)} }

// HostLocation is host memory.
func HostLocation() Location { return Location{Type: LocationHost} }

func (l Location) String() string {
	switch l.Type {
	case LocationDevice:
		return Device(l.ID).String()
	case LocationHost:
		return "host"
	case LocationHostNUMA:
		return fmt.Sprintf("host NUMA node %d", l.ID)
	case LocationHostNUMACurrent:
		return "host NUMA node of the calling thread"
	}
	return fmt.Sprintf("location(type %d, id %d)", int32(l.Type), l.ID)
}

// validate checks the type and that the ID fits the C int it becomes.
func (l Location) validate(op string) error {
	if l.Type < LocationDevice || l.Type > LocationHostNUMACurrent {
		return invalidArg(op, "%s has no valid type: use DeviceLocation or HostLocation", l)
	}
	if l.ID < -1<<31 || l.ID > 1<<31-1 {
		return invalidArg(op, "%s: id does not fit a C int", l)
	}
	return nil
}

// packed returns the 8-byte CUmemLocation{int type; int id} as the one
// integer register the System V AMD64 and AAPCS64 ABIs pass it in by
// value: type in the low 32 bits, id in the high 32 bits (little endian
// field order).
func (l Location) packed() uintptr {
	return uintptr(uint64(uint32(l.Type)) | uint64(uint32(int32(l.ID)))<<32)
}
