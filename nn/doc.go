// Package nn has the layers, losses, optimizers and the GPT model.
//
// A Parameter is an autograd leaf with a dotted name (PyTorch's
// state_dict key) whose storage was allocated with a memory role:
// embedding tables get memory.RoleEmbedding (the hybrid policy puts them
// in managed memory on the GPU), other weights memory.RoleParameter,
// optimizer moments memory.RoleOptimizerState. Layers (Linear, Embedding,
// LayerNorm, RMSNorm, Dropout, CausalSelfAttention, Block) are plain
// structs with a Forward method; Module is anything with Parameters, and
// Layer a Module whose Forward maps a var to a var. Activations are
// functions (ReLU, GELU, SiLU) and Func makes a layer of one. Sequential
// chains layers and names their parameters as torch.nn.Sequential does
// ("0.weight", "2.bias", ...); NewFeedForward builds a multi-layer
// perceptron from a list of sizes. Losses: CrossEntropy and MSELoss (with
// a Reduction).
//
// # Constructors and errors
//
// Every constructor (NewLinear, NewEmbedding, NewLayerNorm, NewRMSNorm,
// NewMLP, NewSequential, NewFeedForward, NewGPT) returns an error instead
// of panicking: a size that is not positive, a negative or NaN std, a
// non-float dtype, a half-precision one (bfloat16, float16) for the
// layers that cannot run with it (NewGPT, NewLayerNorm, NewRMSNorm: their
// arithmetic is float32 or float64; keep float32 parameters and use
// amp.Autocast for half-precision compute; Linear and Embedding accept
// half parameters and run forward and backward on half inputs, their
// gradients in the parameters' dtype, but they cannot be trained: AdamW
// and SGD refuse half parameters, errors wrapping tensor.ErrDType) or
// a layer given twice is an error wrapping tensor.ErrArgument
// (errors.Is), and running out of memory returns the memory error
// (memory.ErrOutOfMemory) with nothing left allocated. Must wraps a
// constructor for programs and tests that treat such a mistake as a bug:
//
//	fc := nn.Must(nn.NewLinear(nn.Options{}, "fc", 2, 8, true, 0))
//
// Options says where parameters go. Its zero value is ready to use: the
// CPU, float32, and a nil Rng means the package's default stream, a
// fixed-seed source shared by all constructors (as PyTorch's default
// generator also starts from a fixed seed, a program that builds its
// model on one goroutine gets the same weights on every run); set Rng to
// choose the seed. A std of 0 in NewLinear and NewEmbedding means
// PyTorch's default initialisation (uniform(−1/√in, 1/√in) for Linear,
// normal(0, 1) for Embedding); a positive std gives normal(0, std)
// weights and a zero bias, GPT-2's initialisation.
//
// Running a model is different: ops and Forward methods panic with a
// *tensor.OpError on misuse (a shape or dtype mistake) and when memory
// runs out, as every tensor op does; tensor.Try turns the panic back into
// an error.
//
// # A training loop
//
// TrainStep is one optimisation step: in a new tensor.Scope it clears the
// gradients, runs the forward pass the caller gives, back-propagates and
// updates, and returns the loss's value or the error (an op's panic, a
// non-finite loss, the optimizer's). Step is the same scope and error
// handling around any function, for steps that need more (gradient
// clipping, a GradScaler, evaluation):
//
//	for step := range steps {
//		loss, err := nn.TrainStep(c, params, opt, func() *autograd.Var {
//			return nn.MSELoss(model.Forward(x), y, nn.ReduceMean)
//		})
//		if err != nil {
//			return err
//		}
//	}
//
// GPT follows nanoGPT: token and position embeddings, pre-norm blocks,
// final LayerNorm, output head tied to the token table, GPT-2
// initialisation, and nanoGPT's parameter names, so SaveWeights writes
// safetensors files PyTorch loads into nanoGPT unchanged. GPTConfigs has
// the tiny, char, gpt2 and gpt2-medium shapes. GPT.Checkpoint chooses
// activation checkpointing (none keeps every activation, the MLP's GELU
// output included; selective keeps the products up to three times a
// block's input and recomputes the rest; with Offload what the
// checkpointed blocks hold waits in pinned host memory between the passes,
// checkpoint.Offload, and selective keeps every product that way),
// GPT.HeadLoss the full or
// the fused, chunked output head and loss (the logits never all held; on
// the GPU also the faster one), SetAttention plain or fused attention.
//
// Weights in and out: LoadWeights reads strata's and nanoGPT's files and
// Hugging Face's GPT-2 checkpoints (Conv1D projections stored (in, out),
// with or without "transformer."), telling the layout from the shapes;
// LoadWeightsLayout says which it read, SaveWeightsLayout writes either,
// GPT.SaveWeights writes a model's with its config in the metadata (as
// train-gpt does), GPTConfigOfWeights reads a file's shape and
// IsTrainStateFile whether it is a training state, and ReadWeightsInfo
// reads both and the metadata from one read of the header. LoadWeights
// and LoadTrainState read the file into host memory and copy each tensor
// to its device through a staging buffer (memory.RoleStaging, at most 16
// MiB per device and dtype; load_stager.go), a chunk at a time, checks
// first and copies after: a device holds about one tensor more than its
// weights while they load, not the file beside them, and a refused file
// or running out of memory changes nothing. Generate
// continues a prompt with a KV cache (a Decoder preallocated to the
// context): greedy or sampled with temperature, top-k and top-p, a seed,
// stop tokens and a callback per token; each new token costs one position
// of attention while the sequence fits the context, past which the model
// sees its last Context tokens, as nanoGPT's generate crops.
//
// AdamW and SGD follow torch.optim exactly (tested against PyTorch's
// values); AdamW decays only parameters with Decay set (2-D weights),
// nanoGPT's grouping. Step refuses bad settings before changing anything
// (an error wrapping tensor.ErrArgument): a learning rate, eps, weight
// decay or momentum that is NaN, infinite or negative, a beta outside
// [0, 1), SGD's Nesterov without momentum, an empty or nil parameter
// list, a parameter listed twice. CheckAdamWSettings is AdamW's check,
// shared with dist.ZeroAdamW. ClipGradNorm refuses a negative or NaN max
// norm; 0 zeroes the gradients and +Inf never clips (ClipGradNormGuarded
// refuses 0). ClipGradNorm and CosineSchedule complete a training loop:
// see examples/train-gpt. AdamW.Overlap queues the update on the
// GPU's side stream, group by group in the parameters' order, so the next
// forward pass starts while it runs and waits only for the parameters it
// reads (tensor.AdamWStepsOverlapped): the same bits, at the cost of
// holding the gradients through the forward pass (see AdamW.Overlap for
// when that pays). AdamW.Pipeline does the same a layer at a time
// (PipelineGroups) and gives each layer's gradients back as soon as its
// update is queued, the host queueing the next forward pass a layer at a
// time behind the update, so that the forward pass reuses the gradients'
// memory instead of holding it (tensor.AdamWStepsPipelined): the same
// bits, for updates bound by the bus under a device budget.
// GPT.SetBlockGradDType keeps the blocks' matrix weights' gradients in
// bf16 (autograd's Var.SetGradDType): ClipGradNorm and AdamW's plain,
// overlapped and pipelined updates take them as they are (a GPU's kernels
// widen each element as they read it, the CPU widens them to float32
// 64 MiB at a time), so the step's peak under a budget, every gradient at
// the end of backward, holds them at half the size (SGD widens a copy of
// one at a time); the guarded update (CUDA graphs) refuses them.
// ClipGradNormGuarded, AdamW.PrepareGuarded and AdamW.StepGuarded are the
// clip and update with their decisions and per-step constants in device
// memory (tensor.StepGuard, tensor.AdamWArgs), the form a CUDA graph can
// capture and replay (tensor.CaptureGraph): the same bits.
//
// # Memory under a device budget
//
// Placement steers a model between steps when the device's memory is
// capped (memory.Manager.SetLimit): it runs the placement scheduler
// (memory.Scheduler), which moves the least used long-lived tensors to
// the offload tier, and chooses the model's checkpointing level among
// CheckpointLevels: raised while the step does not fit, then, while
// tensors touched every step stay off the device, the next level is tried
// and kept only if the measured step is faster (recomputation against
// traffic on the bus), and a level that unsettled first steps raised past
// is tried again; the first step at a new level is not judged (it spills
// what the pool's segments, cut for the level before, cannot hold yet).
// With offloaded checkpointing (Checkpointing.Offload) it also chooses
// how many of the last blocks keep what they hold on the device
// (OffloadKeep): a larger keep is tried while the budget has room and
// stays only if the measured step is faster; fewer are kept when a step
// passes the budget or the scheduler has to demote tensors to fit. In the
// selective mode on the device it chooses, once the level is decided, how
// many of the last blocks keep their MLP's wide product (KeepWide: c_fc's
// output, recomputed in backward otherwise) the same way.
// Results are the same at every level, keep and placement.
package nn
