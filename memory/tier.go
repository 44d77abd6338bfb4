package memory

import "fmt"

// Tier is a kind of memory with its own backend and pool. A tensor's
// storage always lives in exactly one tier, chosen by the Policy from the
// tensor's Role.
type Tier uint8

const (
	// TierHost is plain host memory: the only tier of the CPU device.
	TierHost Tier = iota
	// TierDevice is pooled device memory (cuMemAlloc): gradients,
	// activations, parameters that are updated every step.
	TierDevice
	// TierManaged is CUDA unified memory (cuMemAllocManaged) with
	// cuMemAdvise/prefetch: embeddings, frozen weights, cold data.
	TierManaged
	// TierStaging is mapped pinned host memory (cuMemHostAlloc with
	// DEVICEMAP): short-lived, small, frequently transferred buffers that
	// kernels read over the bus without a copy.
	TierStaging
	// TierOffload is host-resident memory the GPU reads and writes over the
	// bus: CUDA managed memory preferring the host and mapped by the device
	// (what llm.c falls back to). It is the cold tier of the hybrid
	// placement: where the placement scheduler demotes tensors touched a
	// few times a step (optimizer state), and where allocations that do not
	// fit the device tier's budget spill. Its size is bounded by host
	// memory, not by the device's.
	TierOffload
	// NumTiers is the number of tiers.
	NumTiers
)

var tierNames = [NumTiers]string{"host", "device", "managed", "staging", "offload"}

func (t Tier) String() string {
	if t < NumTiers {
		return tierNames[t]
	}
	return fmt.Sprintf("Tier(%d)", uint8(t))
}

// Role says what an allocation is for. Callers attach one to every
// allocation; the Policy maps it to a tier and the statistics are kept
// per role as well as per tier.
type Role uint8

const (
	RoleOther          Role = iota // anything not listed below
	RoleParameter                  // trainable weights, updated every step
	RoleFrozenWeight               // weights that are read but never updated
	RoleEmbedding                  // embedding tables (large, sparse reads)
	RoleGradient                   // gradients of parameters and activations
	RoleOptimizerState             // optimizer moments and similar state
	RoleActivation                 // forward values kept for backward, temporaries
	RoleStaging                    // host<->device transfer buffers, inputs
	RoleWorkspace                  // scratch space of libraries (cuBLAS) and kernels
	// NumRoles is the number of roles.
	NumRoles
)

var roleNames = [NumRoles]string{
	"other", "parameter", "frozen", "embedding", "gradient",
	"optimizer", "activation", "staging", "workspace",
}

func (r Role) String() string {
	if r < NumRoles {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole returns the role named s (as printed by Role.String).
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if n == s {
			return Role(i), nil
		}
	}
	return 0, fmt.Errorf("memory: unknown role %q: %w", s, ErrInvalidArgument)
}

// MarshalText writes the tier's name, for JSON.
func (t Tier) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a tier's name.
func (t *Tier) UnmarshalText(b []byte) error {
	for i, n := range tierNames {
		if n == string(b) {
			*t = Tier(i)
			return nil
		}
	}
	return fmt.Errorf("memory: unknown tier %q: %w", b, ErrInvalidArgument)
}

// MarshalText writes the role's name, for JSON.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a role's name.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err == nil {
		*r = v
	}
	return err
}
