// Package nn has the layers, losses, optimizers and the GPT model.
//
// A Parameter is an autograd leaf with a dotted name (PyTorch's
// state_dict key) whose storage was allocated with a memory role:
// embedding tables get memory.RoleEmbedding (the hybrid policy puts them
// in managed memory on the GPU), other weights memory.RoleParameter,
// optimizer moments memory.RoleOptimizerState. Layers (Linear, Embedding,
// LayerNorm, Dropout, CausalSelfAttention, Block) are plain structs with a
// Forward method; Module is anything with Parameters.
//
// GPT follows nanoGPT: token and position embeddings, pre-norm blocks,
// final LayerNorm, output head tied to the token table, GPT-2
// initialisation, and nanoGPT's parameter names, so SaveWeights writes
// safetensors files PyTorch loads into nanoGPT unchanged. GPTConfigs has
// the tiny, char and gpt2 shapes.
//
// AdamW and SGD follow torch.optim exactly (tested against PyTorch's
// values); AdamW decays only parameters with Decay set (2-D weights),
// nanoGPT's grouping. ClipGradNorm and CosineSchedule complete a training
// loop: see examples/train-gpt.
package nn
