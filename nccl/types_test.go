package nccl

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDataTypes(t *testing.T) {
	cases := []struct {
		dt   DataType
		code int
		name string
		size int
	}{
		{Int8, 0, "int8", 1}, {Uint8, 1, "uint8", 1}, {Int32, 2, "int32", 4}, {Uint32, 3, "uint32", 4},
		{Int64, 4, "int64", 8}, {Uint64, 5, "uint64", 8}, {Float16, 6, "float16", 2},
		{Float32, 7, "float32", 4}, {Float64, 8, "float64", 8}, {BFloat16, 9, "bfloat16", 2},
	}
	for _, c := range cases {
		assert.Equal(t, c.code, int(c.dt), c.name) // ncclDataType_t in nccl.h
		assert.Equal(t, c.name, c.dt.String())
		assert.Equal(t, c.size, c.dt.Size())
		assert.True(t, c.dt.valid())
	}
	assert.Equal(t, "DataType(10)", DataType(10).String())
	assert.Equal(t, "DataType(-1)", DataType(-1).String())
	assert.Equal(t, 0, DataType(10).Size())
}

func TestRedOps(t *testing.T) {
	for i, want := range []string{"sum", "prod", "max", "min", "avg"} {
		assert.Equal(t, want, RedOp(i).String())
	}
	assert.Equal(t, []RedOp{0, 1, 2, 3, 4}, []RedOp{Sum, Prod, Max, Min, Avg}) // ncclRedOp_t
	assert.Equal(t, "RedOp(5)", RedOp(5).String())
	assert.False(t, RedOp(-1).valid())
}

func TestResultsAndErrors(t *testing.T) {
	assert.Equal(t, "ncclSuccess", Success.String())
	assert.Equal(t, "ncclInvalidUsage", InvalidUsage.String())
	assert.Equal(t, "ncclInProgress", InProgress.String())
	assert.Equal(t, "ncclResult(42)", Result(42).String())

	e := &Error{Op: "ncclAllReduce", Detail: "1024 float32 sum, rank 0 of 2 (cuda:0)", Code: InvalidArgument,
		Msg: "invalid argument (run with NCCL_DEBUG=WARN for details): AllReduce : invalid root 3"}
	assert.Equal(t, "nccl: ncclAllReduce (1024 float32 sum, rank 0 of 2 (cuda:0)): ncclInvalidArgument (4): "+
		"invalid argument (run with NCCL_DEBUG=WARN for details): AllReduce : invalid root 3", e.Error())
	assert.Equal(t, "nccl: ncclGroupEnd: ncclSystemError (2)", (&Error{Op: "ncclGroupEnd", Code: SystemError}).Error())

	wrapped := fmt.Errorf("step 3: %w", e)
	assert.ErrorIs(t, wrapped, ErrInvalidArgument)
	var ne *Error
	assert.True(t, errors.As(wrapped, &ne))
	assert.Equal(t, InvalidArgument, ne.Code)
	assert.ErrorIs(t, &Error{Code: InvalidUsage}, ErrInvalidArgument)
	assert.NotErrorIs(t, &Error{Code: SystemError}, ErrInvalidArgument)
	assert.NotErrorIs(t, &Error{Code: InvalidArgument}, ErrNotAvailable)

	a := invalidArg("AllReduce", "negative count %d", -1)
	assert.Equal(t, "nccl: AllReduce: negative count -1", a.Error())
	assert.ErrorIs(t, a, ErrInvalidArgument)
}

func TestVersionString(t *testing.T) {
	assert.Equal(t, "2.23.4", VersionString(22304))
	assert.Equal(t, "2.8.4", VersionString(2804))
	assert.Equal(t, "2.10.3", VersionString(21003))
}
