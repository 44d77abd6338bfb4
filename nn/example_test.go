package nn_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// A multi-layer perceptron learns XOR on the CPU. This is the program of
// the README's "Use strata in your program" (TestReadmeExample checks
// that the two are the same).
func Example_xor() {
	s := tensor.NewScope() // owns the data and the tensors of the last forward pass
	defer s.Close()
	// XOR: four points and their labels; Linear(2, 8), ReLU, Linear(8, 1).
	x := autograd.Const(tensor.FromFloat32s(tensor.CPU(), []float32{0, 0, 0, 1, 1, 0, 1, 1}, 4, 2))
	y := autograd.Const(tensor.FromFloat32s(tensor.CPU(), []float32{0, 1, 1, 0}, 4, 1))
	o := nn.Options{Rng: rand.New(rand.NewPCG(1, 2))} // the CPU, float32, a seeded stream
	model, err := nn.NewFeedForward(o, "mlp", nn.ReLU, 2, 8, 1)
	if err != nil {
		panic(err)
	}
	defer nn.Release(model.Parameters()) // parameters and optimizer state live outside scopes
	opt := nn.NewAdamW(model.Parameters(), 0.05, 0)
	defer opt.Release()
	for step := range 100 {
		loss, err := nn.TrainStep(nil, model.Parameters(), opt, func() *autograd.Var {
			return nn.MSELoss(model.Forward(x), y, nn.ReduceMean)
		})
		if err != nil {
			panic(err)
		}
		if step%25 == 24 {
			fmt.Printf("step %d: loss %.4f\n", step+1, loss)
		}
	}
	autograd.NoGrad(func() {
		for i, p := range model.Forward(x).Value.Float32s() {
			fmt.Println(x.Value.Float32s()[2*i:2*i+2], "->", p > 0.5)
		}
	})
	// Output:
	// step 25: loss 0.1122
	// step 50: loss 0.0067
	// step 75: loss 0.0004
	// step 100: loss 0.0000
	// [0 0] -> false
	// [0 1] -> true
	// [1 0] -> true
	// [1 1] -> false
}

// Linear regression: one Linear layer fits y = 2x − 1 with SGD.
func ExampleTrainStep() {
	c := tensor.NewCtx() // this goroutine's context (tensor.Background() would do too)
	s := c.NewScope()    // owns the data; each TrainStep frees its own tensors
	defer s.Close()
	x := autograd.Const(c.FromFloat32s(tensor.CPU(), []float32{-1, -0.5, 0, 0.5, 1, 1.5}, 6, 1))
	y := autograd.Const(c.FromFloat32s(tensor.CPU(), []float32{-3, -2, -1, 0, 1, 2}, 6, 1))

	fc := nn.Must(nn.NewLinear(nn.Options{Rng: rand.New(rand.NewPCG(3, 3))}, "fc", 1, 1, true, 0))
	defer nn.Release(fc.Parameters()) // parameters and optimizer state live outside scopes
	opt := nn.NewSGD(fc.Parameters(), 0.1, 0.9)
	defer opt.Release()
	var loss float64
	for range 300 {
		var err error
		loss, err = nn.TrainStep(c, fc.Parameters(), opt, func() *autograd.Var {
			return nn.MSELoss(fc.Forward(x), y, nn.ReduceMean)
		})
		if err != nil {
			panic(err)
		}
	}
	fmt.Printf("loss %.6f: y = %.3f x %+.3f\n", loss, fc.Weight.Value.Item(), fc.Bias.Value.Item())
	// Output:
	// loss 0.000000: y = 2.000 x -1.000
}

// Step runs a step of one's own in a scope, with the errors returned: here
// with gradient clipping between backward and the update.
func ExampleStep() {
	fc := nn.Must(nn.NewLinear(nn.Options{Rng: rand.New(rand.NewPCG(1, 1))}, "fc", 3, 1, true, 0))
	params := fc.Parameters()
	defer nn.Release(params) // parameters and optimizer state live outside scopes
	opt := nn.NewAdamW(params, 1e-3, 0.01)
	defer opt.Release()
	err := nn.Step(nil, func() error {
		x := autograd.Const(tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 3, 4, 5, 6}, 2, 3))
		y := autograd.Const(tensor.FromFloat32s(tensor.CPU(), []float32{10, -10}, 2, 1))
		nn.ZeroGrad(params)
		loss := nn.MSELoss(fc.Forward(x), y, nn.ReduceMean)
		if err := loss.Backward(); err != nil {
			return err
		}
		norm, err := nn.ClipGradNorm(params, 1)
		if err != nil {
			return err
		}
		fmt.Printf("gradient norm %.2f clipped to 1\n", norm)
		return opt.Step()
	})
	fmt.Println("error:", err)

	// A shape mistake comes back as an error, not a panic.
	err = nn.Step(nil, func() error {
		fc.Forward(autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 4)))
		return nil
	})
	fmt.Println(errors.Is(err, tensor.ErrShape))
	// Output:
	// gradient norm 97.57 clipped to 1
	// error: <nil>
	// true
}

// Sequential names parameters as torch.nn.Sequential does, so state_dict
// keys match: layers built with an empty name get "index.weight".
func ExampleNewSequential() {
	o := nn.Options{}
	model, err := nn.NewSequential("",
		nn.Must(nn.NewLinear(o, "", 4, 16, true, 0)),
		nn.Func(nn.SiLU),
		nn.Must(nn.NewRMSNorm(o, "", 16)),
		nn.Must(nn.NewLinear(o, "", 16, 2, true, 0)),
	)
	if err != nil {
		panic(err)
	}
	defer nn.Release(model.Parameters())
	for _, p := range model.Parameters() {
		fmt.Println(p.Name, p.Value.Shape())
	}
	fmt.Println(nn.CountParams(model.Parameters()), "parameters")

	_, err = nn.NewLinear(o, "bad", 0, 16, true, 0)
	fmt.Println(err)
	// Output:
	// 0.weight [16 4]
	// 0.bias [16]
	// 2.weight [16]
	// 3.weight [2 16]
	// 3.bias [2]
	// 130 parameters
	// nn: NewLinear "bad": in = 0, want > 0: invalid argument
}

func ExampleMSELoss() {
	tensor.WithScope(func() {
		pred := autograd.Param(tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 3}, 3), "pred")
		target := autograd.Const(tensor.FromFloat32s(tensor.CPU(), []float32{1, 0, 5}, 3))
		fmt.Println(nn.MSELoss(pred, target, nn.ReduceSum).Item())
		loss := nn.MSELoss(pred, target, nn.ReduceMean)
		fmt.Printf("%.4f\n", loss.Item())
		if err := loss.Backward(); err != nil {
			panic(err)
		}
		fmt.Println(pred.Grad.Float32s()) // 2(pred − target)/3
		fmt.Println(nn.MSELoss(pred, target, nn.ReduceNone).Value.Float32s())
		pred.ZeroGrad()
		pred.Value.Release()
	})
	// Output:
	// 8
	// 2.6667
	// [0 1.3333334 -1.3333334]
	// [0 4 4]
}

// TestReadmeExample checks that the README's program (section "Use strata
// in your program") is Example_xor's code with a main around it, then
// builds and runs it as a program of its own module, which must print
// Example_xor's output.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	between := func(s, from, to string) string {
		t.Helper()
		i := strings.Index(s, from)
		if i < 0 {
			t.Fatalf("no %q", from)
		}
		s = s[i+len(from):]
		j := strings.Index(s, to)
		if j < 0 {
			t.Fatalf("no %q after %q", to, from)
		}
		return s[:j]
	}
	section := between(string(readme), "## Use strata in your program\n", "\n## ")
	prog := between(section, "```go\n", "```\n")
	body := between(prog, "func main() {\n", "\n}\n")
	example := between(string(src), "func Example_xor() {\n", "\t// Output:\n")
	if body+"\n" != example {
		t.Fatalf("README's main differs from Example_xor:\n--- README\n%s\n--- Example_xor\n%s", body, example)
	}
	want := between(string(src)[strings.Index(string(src), "func Example_xor"):], "\t// Output:\n", "}\n")
	want = strings.ReplaceAll(want, "\t// ", "")

	if testing.Short() {
		t.Skip("-short: not building the README's program")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the README's program with")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/readme\n\ngo 1.26\n\nrequire github.com/strata-ml/strata v0.0.0\n\nreplace github.com/strata-ml/strata => " + root + "\n"
	for name, data := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(prog)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goTool, "run", ".")
	cmd.Dir = dir
	// Offline, from the module cache the repository's own build filled;
	// -mod=mod lets go add the requirements the README's go.mod leaves out.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run of the README's program: %v\n%s", err, out)
	}
	if string(out) != want {
		t.Fatalf("README's program printed\n%s\nwant (Example_xor's output)\n%s", out, want)
	}
}
