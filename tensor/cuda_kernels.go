package tensor

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/strata-ml/strata/cuda"
)

// kernelsFatbin is kernels/*.cu compiled by `make kernels` (SASS for sm_80
// and sm_90, PTX for compute_80). kernels.sha256 records the hash of the
// sources it was built from; TestKernelSourcesMatchFatbin fails when they
// drift apart.
//
//go:embed kernels.fatbin
var kernelsFatbin []byte

// EnvKernels names a fatbin file to load instead of the embedded one, so a
// GPU machine can compile changed kernels and test them without
// rebuilding the Go program.
const EnvKernels = "STRATA_KERNELS"

// fatbinMagic starts every fatbin nvcc writes.
const fatbinMagic = 0xBA55ED50

// kernelImage returns the fatbin to load and where it came from.
func kernelImage() ([]byte, string, error) {
	if p := os.Getenv(EnvKernels); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, "", fmt.Errorf("reading the kernels named by %s: %w", EnvKernels, err)
		}
		return b, p, nil
	}
	if len(kernelsFatbin) < 4 || binary.LittleEndian.Uint32(kernelsFatbin) != fatbinMagic {
		return nil, "", fmt.Errorf("the embedded tensor/kernels.fatbin (%d bytes) is not a fatbin: run `make kernels` on a machine with nvcc, or set %s", len(kernelsFatbin), EnvKernels)
	}
	return kernelsFatbin, "embedded kernels.fatbin", nil
}

// Index helpers for the kernel tables: by element size, by float dtype.
const (
	kB2, kB4, kB8  = 0, 1, 2 // 2-, 4- and 8-byte elements
	kF32, kF64     = 0, 1
	kIdx32, kIdx64 = 0, 1 // 32- or 64-bit index arithmetic
	kSum, kMax     = 0, 1
	kWarp, kBlock  = 0, 1 // a warp or a block per row
)

var (
	sizeSuffix  = [3]string{"b2", "b4", "b8"}
	floatSuffix = [2]string{"f32", "f64"}
	castSuffix  = [numDTypes]string{Float32: "f32", Float64: "f64", Float16: "f16", BFloat16: "bf16", Int32: "i32"}
)

// cudaKernels holds every kernel of the fatbin, looked up once when the
// device opens, so launches index arrays instead of searching names.
type cudaKernels struct {
	fill          [3]*cuda.Function
	cast          [numDTypes][numDTypes]*cuda.Function
	copyStrided   [3][2]*cuda.Function
	copyWide      [2]*cuda.Function // 16-byte words (widenLayout)
	copyTranspose [3]*cuda.Function
	copy2D        [3]*cuda.Function

	unary, unaryBackward, affine, binary [2]*cuda.Function
	unaryTo, unaryBackwardTo             [2]*cuda.Function // float32 to float16, bfloat16
	unaryHalf, unaryBackwardHalf         [2]*cuda.Function // float16, bfloat16 sources
	binaryStrided                        [2][2]*cuda.Function
	binaryRowB                           [2]*cuda.Function // a row broadcast over a contiguous operand

	reduceRows, reduceCols, reduceFinal [2][2]*cuda.Function // [sum/max][dtype]
	sumSquares                          [2]*cuda.Function
	sumSquaresMulti                     [4]*cuda.Function // by sumSquaresKind: f32, f64, bf16, f16
	sumPartials, countTargets           *cuda.Function
	meanDivisor                         [2]*cuda.Function

	softmax, softmaxBackward [2][2]*cuda.Function // [warp/block][dtype]
	causalMask               [2]*cuda.Function

	layerNorm, lnBackwardDx, lnDwdbPartial, lnDwdbFinal [2]*cuda.Function
	layerNormTo                                         [2]*cuda.Function          // float32 in, float16 or bfloat16 out
	lnBackwardReg                                       [lnMaxWords]*cuda.Function // float32 rows in registers, [words a lane - 1]

	gather                                  [3]*cuda.Function
	scatterKeys, sortKeysTile, sortKeysStep *cuda.Function
	scatterRuns                             [2]*cuda.Function

	crossEntropy, crossEntropyBackward [2][2]*cuda.Function // [warp/block][dtype]
	// [warp/block][logits→gradient: f32→f32, f32→f16, f32→bf16, f64→f64, f16→f16, bf16→bf16]
	crossEntropyFused [2][6]*cuda.Function

	dropout, adamw, adamwMulti, sgd [2]*cuda.Function
	gemmF64                         *cuda.Function
	unscaleCheck                    *cuda.Function    // kernels/amp.cuh
	adamwMultiGuarded               [2]*cuda.Function // kernels/optim.cuh, for graphs
	clipGuard, scaleGuarded         *cuda.Function    // kernels/guard.cuh
	unscaleGuarded                  *cuda.Function

	attention attentionKernels // kernels/attention.cuh (cuda_attention.go)
}

// bindings lists every kernel name with the slot it fills.
func (k *cudaKernels) bindings() map[string]**cuda.Function {
	m := map[string]**cuda.Function{
		"sum_partials":               &k.sumPartials,
		"sum_squares_multi_bf16":     &k.sumSquaresMulti[2],
		"sum_squares_multi_f16":      &k.sumSquaresMulti[3],
		"count_targets":              &k.countTargets,
		"gemm_f64":                   &k.gemmF64,
		"scatter_keys":               &k.scatterKeys,
		"sort_keys_tile":             &k.sortKeysTile,
		"sort_keys_step":             &k.sortKeysStep,
		"unscale_check_f32":          &k.unscaleCheck,
		"clip_guard":                 &k.clipGuard,
		"scale_guarded_f32":          &k.scaleGuarded,
		"unscale_guarded_f32":        &k.unscaleGuarded,
		"copy_strided_b16_i32":       &k.copyWide[kIdx32],
		"copy_strided_b16_i64":       &k.copyWide[kIdx64],
		"unary_to_f32_f16":           &k.unaryTo[0],
		"unary_to_f32_bf16":          &k.unaryTo[1],
		"unary_backward_to_f32_f16":  &k.unaryBackwardTo[0],
		"unary_backward_to_f32_bf16": &k.unaryBackwardTo[1],
		"layernorm_to_f32_f16":       &k.layerNormTo[0],
		"unary_to_f16_f16":           &k.unaryHalf[0],
		"unary_to_bf16_bf16":         &k.unaryHalf[1],
		"unary_backward_half_f16":    &k.unaryBackwardHalf[0],
		"unary_backward_half_bf16":   &k.unaryBackwardHalf[1],
		"layernorm_to_f32_bf16":      &k.layerNormTo[1],
	}
	k.attention.bind(m)
	for g, shape := range [2]string{"warp", "block"} {
		for i, sfx := range ceFusedSuffix {
			m["cross_entropy_fused_"+shape+"_"+sfx] = &k.crossEntropyFused[g][i]
		}
	}
	for s, sfx := range sizeSuffix {
		m["fill_u"+[3]string{"16", "32", "64"}[s]] = &k.fill[s]
		m["copy_strided_"+sfx+"_i32"] = &k.copyStrided[s][kIdx32]
		m["copy_strided_"+sfx+"_i64"] = &k.copyStrided[s][kIdx64]
		m["copy_transpose_"+sfx] = &k.copyTranspose[s]
		m["copy2d_"+sfx] = &k.copy2D[s]
		m["gather_"+sfx] = &k.gather[s]
	}
	for from := range numDTypes {
		for to := range numDTypes {
			if from != to {
				m["cast_"+castSuffix[from]+"_"+castSuffix[to]] = &k.cast[from][to]
			}
		}
	}
	for f, sfx := range floatSuffix {
		m["unary_"+sfx] = &k.unary[f]
		m["mean_divisor_"+sfx] = &k.meanDivisor[f]
		m["unary_backward_"+sfx] = &k.unaryBackward[f]
		m["affine_"+sfx] = &k.affine[f]
		m["binary_"+sfx] = &k.binary[f]
		m["binary_rowb_"+sfx] = &k.binaryRowB[f]
		m["binary_strided_"+sfx+"_i32"] = &k.binaryStrided[f][kIdx32]
		m["binary_strided_"+sfx+"_i64"] = &k.binaryStrided[f][kIdx64]
		for r, op := range [2]string{"sum", "max"} {
			m["reduce_rows_"+op+"_"+sfx] = &k.reduceRows[r][f]
			m["reduce_cols_"+op+"_"+sfx] = &k.reduceCols[r][f]
			m["reduce_final_"+op+"_"+sfx] = &k.reduceFinal[r][f]
		}
		m["sum_squares_"+sfx] = &k.sumSquares[f]
		m["sum_squares_multi_"+sfx] = &k.sumSquaresMulti[f]
		for g, shape := range [2]string{"warp", "block"} {
			m["softmax_"+shape+"_"+sfx] = &k.softmax[g][f]
			m["softmax_backward_"+shape+"_"+sfx] = &k.softmaxBackward[g][f]
			m["cross_entropy_"+shape+"_"+sfx] = &k.crossEntropy[g][f]
			m["cross_entropy_backward_"+shape+"_"+sfx] = &k.crossEntropyBackward[g][f]
		}
		m["causal_mask_"+sfx] = &k.causalMask[f]
		m["layernorm_"+sfx] = &k.layerNorm[f]
		m["layernorm_backward_dx_"+sfx] = &k.lnBackwardDx[f]
		m["layernorm_dwdb_partial_"+sfx] = &k.lnDwdbPartial[f]
		m["layernorm_dwdb_final_"+sfx] = &k.lnDwdbFinal[f]
		m["scatter_runs_"+sfx] = &k.scatterRuns[f]
		if f == kF32 {
			for v := range k.lnBackwardReg {
				m[fmt.Sprintf("layernorm_backward_reg_f32_v%d", v+1)] = &k.lnBackwardReg[v]
			}
		}
		m["dropout_"+sfx] = &k.dropout[f]
		m["adamw_"+sfx] = &k.adamw[f]
		m["adamw_multi_"+sfx] = &k.adamwMulti[f]
		m["adamw_multi_guarded_"+sfx] = &k.adamwMultiGuarded[f]
		m["sgd_"+sfx] = &k.sgd[f]
	}
	return m
}

// loadKernels loads the fatbin into ctx and resolves every kernel. A
// missing kernel means the fatbin is older than this Go code.
func loadKernels(ctx *cuda.Context) (*cuda.Module, *cudaKernels, error) {
	img, from, err := kernelImage()
	if err != nil {
		return nil, nil, err
	}
	mod, err := ctx.ModuleLoadData(img)
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", from, err)
	}
	k := &cudaKernels{}
	for name, slot := range k.bindings() {
		fn, err := mod.Function(name)
		if err != nil {
			_ = mod.Unload()
			return nil, nil, fmt.Errorf("%s lacks kernel %s (is it older than the Go code? run `make kernels`): %w", from, name, err)
		}
		*slot = fn
	}
	if err := k.attention.readBlocks(); err != nil {
		_ = mod.Unload()
		return nil, nil, fmt.Errorf("%s: %w", from, err)
	}
	return mod, k, nil
}
