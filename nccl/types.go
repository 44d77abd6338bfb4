package nccl

import "strconv"

// UniqueID is an ncclUniqueId: 128 opaque bytes that GetUniqueID makes on
// one rank and every rank passes to CommInitRank. It is plain data: send
// it to the other processes any way (a file, an environment variable in
// hex, a TCP socket of the launcher).
type UniqueID [128]byte

// DataType is an ncclDataType_t: the element type of a collective's
// buffers.
type DataType int32

// The ncclDataType_t values of NCCL 2.x (BFloat16 needs 2.10+).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	BFloat16 DataType = 9
)

var dataTypes = [...]struct {
	name string
	size int
}{
	{"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8},
	{"float16", 2}, {"float32", 4}, {"float64", 8}, {"bfloat16", 2},
}

func (t DataType) valid() bool { return t >= 0 && int(t) < len(dataTypes) }

func (t DataType) String() string {
	if t.valid() {
		return dataTypes[t].name
	}
	return "DataType(" + strconv.Itoa(int(t)) + ")"
}

// Size returns the size of one element in bytes (0 for an unknown type).
func (t DataType) Size() int {
	if t.valid() {
		return dataTypes[t].size
	}
	return 0
}

// RedOp is an ncclRedOp_t: how AllReduce and ReduceScatter combine the
// ranks' values.
type RedOp int32

// The built-in ncclRedOp_t values (Avg needs NCCL 2.10+).
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

var redOpNames = [...]string{"sum", "prod", "max", "min", "avg"}

func (o RedOp) valid() bool { return o >= 0 && int(o) < len(redOpNames) }

func (o RedOp) String() string {
	if o.valid() {
		return redOpNames[o]
	}
	return "RedOp(" + strconv.Itoa(int(o)) + ")"
}
