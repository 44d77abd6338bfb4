// Package gorgonia connects strata to gorgonia.org/tensor, the tensor
// library of the Gorgonia project: it converts tensors both ways, and
// lets gorgonia tensors live in strata's memory tiers through an Engine.
//
// # Why a module of its own
//
// strata's core (cuda, memory, tensor, autograd, nn) never imports
// gorgonia. gorgonia.org/tensor brings its own dependency tree (Apache
// Arrow, flatbuffers, two protobuf modules and more), which a program
// that trains a model with strata does not need, so this package is a
// module of its own, github.com/strata-ml/strata/interop/gorgonia, and
// strata's go.mod does not require gorgonia:
//
//	go get github.com/strata-ml/strata/interop/gorgonia
//
// Measured on a program that imports nn, autograd and tensor, after `go
// mod tidy`: with the conversion inside package tensor, 19 requirements
// in its go.mod and 152 lines in go.sum. With it in a package of strata's
// module, 5 requirements and 14 go.sum lines, but `go list -m all` listed
// 47 modules, gorgonia's tree among them, because strata's go.mod
// required gorgonia. With it in a module of its own, the
// same 5 requirements and 14 lines, and 33 modules in
// `go list -m all`, none of them gorgonia's. Its go.mod requires
// go4.org/unsafe/assume-no-moving-gc at a version that runs on Go 1.26
// (older ones panic at start). In this repository its go.mod replaces
// strata with the enclosing checkout (../..); make test vets and tests it
// too.
//
// # Conversion
//
// ToDense and FromDense copy; nothing is shared. Both keep the logical
// order: a strata view (transpose, permute, narrow, expand) goes into the
// Dense as the elements it shows, and a gorgonia view (T, Slice) or
// column-major Dense comes out row-major, as every strata tensor is,
// read by walking the Dense's strides over its storage without
// materializing it (which, on a Dense of an Engine, would allocate). The
// element types both libraries have convert: float32, float64 and int32.
// gorgonia has no float16 or bfloat16 (widen with Tensor.To first), and
// strata no other integers, bools or complex numbers: those are errors
// wrapping tensor.ErrDType. A rank-0 tensor and a scalar Dense map to
// each other. A Dense of no elements becomes a tensor of its shape;
// ToDense refuses a tensor of no elements (ErrShape). A strata tensor has
// no mask, so a masked Dense with elements is an error. Tensors on a CUDA
// device convert through host copies.
//
// # The Engine
//
// gorgonia asks an Engine for the memory of every Dense made with
// tensor.WithEngine (and of the Denses its operations make from it, such
// as the result of a non-in-place Add, which clones its operand). Engine
// serves those requests from a memory.Manager, for one memory.Role fixed
// when it is made: the manager's policy places the role in a tier
// (pooled device memory for gradients and activations, managed memory for
// embeddings, mapped pinned staging memory, plain host memory) and its
// statistics count every byte, per tier and per role, like the tensors of
// strata itself. Allocations come from the tier's caching pool, so a
// gorgonia program that allocates and frees the same shapes in a loop
// reuses blocks instead of calling the driver.
//
//	gt.New(gt.WithShape(...), gt.Of(dt), gt.WithEngine(e))
//	   └─ Engine.Alloc(bytes) ─ Manager.Alloc(bytes, role) ─ Policy ─ Pool of the tier
//
// The memory is outside Go's heap, so the Engine says NonStdAlloc and
// gorgonia marks its tensors manually managed: every Dense whose Engine()
// is the Engine, results of operations such as Add, MatMul and Clone
// included, must be given back with Engine.Free(d, int64(d.MemSize())),
// or it stays allocated until the manager is closed, whose error then
// reports it as a leak. Reductions (Sum) return a Dense in Go memory,
// with another engine: it is not the Engine's to free. A Dense of no
// elements takes no memory (Alloc(0)), and Free takes it back all the
// same. Go's garbage
// collector never scans that memory, so only element types without
// pointers belong there (numbers and bools, not strings or interfaces).
//
// Whether the CPU can address the memory decides what gorgonia can do
// with it. NewEngine allocates one byte for its role to learn that, and
// AllocAccessible reports it. Host, managed and staging memory are
// host-accessible: Accessible returns them, and the Engine embeds
// gorgonia's standard engine (tensor.StdEng), so arithmetic, reductions
// and linear algebra work on such tensors directly. Plain device memory
// is not: gorgonia flags such a Dense as inaccessible and its operations
// refuse it, Accessible and FromDense return errors wrapping
// ErrInaccessible, and Memset, Memclr and Memcpy move its bytes through
// the driver (cuMemsetD8/D32, cuMemcpyHtoD/DtoH/DtoD), which needs the
// *cuda.Context passed to NewEngine. If the manager's policy later moves
// the role from host-accessible memory to device memory, Alloc refuses
// rather than hand gorgonia memory it would read from the CPU.
//
// Memcpy copies bytes in storage order, as gorgonia's standard engine
// does; either side may be memory of the Engine, in any tier, or a
// gorgonia tensor's Go memory. Memset and Memclr on host-accessible
// memory let a Dense set its own elements (views included); on device
// memory they fill the whole allocation, and refuse a view.
//
// # Go 1.26
//
// gorgonia.org/tensor imports go4.org/unsafe/assume-no-moving-gc, and the
// 2022 copy its go.mod asks for panics at start on Go 1.26;
// v0.0.0-20231121144256-b99613f794b6 does not. This package imports it as
// well, so that this module's go.mod (interop/gorgonia/go.mod; strata's
// own requires neither gorgonia nor go4.org) keeps requiring that version
// directly and minimal version selection gives it to every program that
// imports this package.
package gorgonia
