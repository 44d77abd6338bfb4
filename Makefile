# strata: the commands a developer needs. See README.md.
GO      ?= go
PKGS    := ./...
GPU_OUT := .gpu
# Nested modules, each with its own go.mod (the root's ./... skips them):
# interop/gorgonia keeps gorgonia's dependency tree out of strata's go.mod.
SUBMODS := interop/gorgonia

.PHONY: test test-short bench run lint fmt tidy gpu test-gpu kernels clean fuzz

# The test suite CI runs (.ci/run): vet, then every package's tests on the
# CPU; GPU tests skip cleanly without a driver. The nested modules too.
test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 30m $(PKGS)
	@for m in $(SUBMODS); do echo "== $$m (module)"; (cd $$m && $(GO) vet ./... && $(GO) test -count=1 -timeout 30m ./...) || exit 1; done

test-short:
	$(GO) test -short -count=1 $(PKGS)
	@for m in $(SUBMODS); do (cd $$m && $(GO) test -short -count=1 ./...) || exit 1; done

# Every fuzz target for FUZZTIME each (go test runs their seed corpora as
# plain tests in make test).
FUZZTIME ?= 5m
FUZZ := ./tensor:FuzzOpArguments ./tensor:FuzzReadSafetensors ./memory:FuzzManager ./memory:FuzzPool ./tokenizer:FuzzGPT2
fuzz:
	@for t in $(FUZZ); do echo "== $$t"; $(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) || exit 1; done

# Micro-benchmarks of every package, then the tiny-GPT training benchmark.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x $(PKGS)
	@for m in $(SUBMODS); do (cd $$m && $(GO) test -run '^$$' -bench . -benchtime 1x ./...) || exit 1; done
	$(GO) run ./examples/train-gpt -config tiny -device cpu -bench

# The main job: train a small GPT on the built-in task (GPU when present).
run:
	$(GO) run ./examples/train-gpt

# staticcheck comes from the module proxy at a pinned version (not part of
# make test, which must not need the network beyond the module cache).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	@for m in $(SUBMODS); do (cd $$m && $(GO) vet ./...) || exit 1; done
	$(GO) run $(STATICCHECK) $(PKGS)
	@for m in $(SUBMODS); do (cd $$m && $(GO) run $(STATICCHECK) ./...) || exit 1; done

fmt:
	gofmt -w $$(git ls-files '*.go')

# go mod tidy in the root module and every nested one.
tidy:
	$(GO) mod tidy
	@for m in $(SUBMODS); do (cd $$m && $(GO) mod tidy) || exit 1; done

# Build the GPU-relevant test binaries and the example programs for a GPU
# machine without Go (see ../shared/GPU.md), stripped and packed into
# .gpu/strata-gpu.tar.xz (the device tool carries at most 64 MiB);
# bench/gpu-session.sh unpacks it there and runs each test binary from its
# package folder, e.g. (cd memory && ../.gpu/memory.test -test.v).
# The interop test binary is built from its own module (SUBMODS).
GPU_PKGS := ./cuda ./nccl ./memory ./tensor ./tensor/internal/cpukern ./autograd ./nn ./amp ./checkpoint ./dist ./examples/train-gpt ./examples/memstrategies
gpu:
	rm -rf $(GPU_OUT) && mkdir -p $(GPU_OUT)/bin
	CGO_ENABLED=0 $(GO) test -c -ldflags='-s -w' -o $(GPU_OUT)/bin/ $(GPU_PKGS)
	cd interop/gorgonia && CGO_ENABLED=0 $(GO) test -c -ldflags='-s -w' -o $(abspath $(GPU_OUT))/bin/ .
	CGO_ENABLED=0 $(GO) build -ldflags='-s -w' -o $(GPU_OUT)/bin/ ./examples/...
	XZ_OPT=-9e tar -C $(GPU_OUT)/bin -cJf $(GPU_OUT)/strata-gpu.tar.xz . && rm -rf $(GPU_OUT)/bin
	@ls -l $(GPU_OUT)

# Run on a machine with Go and a GPU: the suites the lent GPU runs
# (bench/gpu-hybrid.sh suites24), whole, with the GPU required (a test that
# needs it fails instead of skipping without it); NCCL's own tests skip
# where the library is missing, and its multi-GPU ones on one GPU.
test-gpu:
	STRATA_REQUIRE_GPU=1 $(GO) test -count=1 -timeout 30m $(filter-out ./nccl,$(GPU_PKGS))
	$(GO) test -count=1 ./nccl

# Compile kernels/*.cu into the fatbin package tensor embeds (SASS for
# sm_80 and sm_90, PTX for compute_80 so newer GPUs JIT it) and record the
# hash of the sources it was built from; commit both. A CPU-only test fails
# while the sources and tensor/kernels.sha256 disagree. all.cu is the one
# translation unit; it includes the .cuh files.
NVCC         ?= nvcc
NVCC_FLAGS   ?= -std=c++17 -O3
KERNEL_SRCS  := $(sort $(wildcard kernels/*.cu kernels/*.cuh))

kernels:
	$(NVCC) $(NVCC_FLAGS) -fatbin -gencode arch=compute_90,code=sm_90 \
		-gencode 'arch=compute_80,code=[sm_80,compute_80]' \
		-o tensor/kernels.fatbin kernels/all.cu
	cat $(KERNEL_SRCS) | sha256sum | cut -d' ' -f1 > tensor/kernels.sha256

# The default outputs of make run and of the README's commands: the
# weights, their loss plot and (after an interrupt) the training state,
# and memstrategies' bar chart.
clean:
	rm -rf $(GPU_OUT) gpt.safetensors gpt.loss.png gpt.state.safetensors memstrategies.png
