package memory_test

import (
	"fmt"

	"github.com/strata-ml/strata/memory"
)

func ExampleNewHostManager() {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()

	grad, err := m.Alloc(3<<20, memory.RoleGradient)
	if err != nil {
		panic(err)
	}
	emb, err := m.Alloc(1000, memory.RoleEmbedding)
	if err != nil {
		panic(err)
	}
	fmt.Println(grad.Tier(), emb.Tier(), emb.Advice())
	copy(emb.Host(), "hello")

	s := m.Stats()
	fmt.Println("in use:", memory.FormatBytes(m.InUse()))
	fmt.Println("device reserved:", memory.FormatBytes(s.Tiers[memory.TierDevice].Reserved.Current))
	fmt.Println("embedding allocated:", memory.FormatBytes(s.Roles[memory.RoleEmbedding].Allocated.Current))

	_ = grad.Free()
	_ = emb.Free()
	fmt.Println("in use after free:", memory.FormatBytes(m.InUse()))
	// Output:
	// device managed prefer-device|accessed-by-device|prefetch-to-device
	// in use: 3.00 MiB
	// device reserved: 4.00 MiB
	// embedding allocated: 1.00 KiB
	// in use after free: 0 B
}
