package nn

import (
	"fmt"
	"strings"
)

// PipelineGroups splits ps, a model's parameters in the order its forward
// pass reads them, into the groups of a pipelined AdamW step
// (AdamW.Pipeline): the ends of the groups in ps, as
// tensor.AdamWStepsPipelined takes them. A layer is the parameters whose
// names share the prefix up to the first all-digit part ("transformer.h.3"
// for "transformer.h.3.attn.c_attn.weight", "0" for Sequential's
// "0.weight"), and consecutive parameters of one layer form one group;
// parameters of no numbered layer (a GPT's embeddings, its final norm)
// are grouped while in a row and under a 32nd of all the parameters'
// bytes (at least 4 MiB), so that the forward pass's first reads wait for
// little. Each group is a launch, an event and a wait of the forward pass.
// A nil entry is an error wrapping tensor.ErrArgument that names its
// index.
func PipelineGroups(ps []*Parameter) ([]int, error) {
	for i, p := range ps {
		if err := notNil(i, p); err != nil {
			return nil, fmt.Errorf("nn: PipelineGroups: %w", err)
		}
	}
	return pipelineGroups(ps), nil
}

// pipelineGroups is PipelineGroups of a list without nil entries (an
// optimizer's, checked by distinct).
func pipelineGroups(ps []*Parameter) []int {
	var total int64
	for _, p := range ps {
		total += p.Value.Bytes()
	}
	limit := max(total/32, 4<<20)
	var ends []int
	key, n := "", int64(0)
	for i, p := range ps {
		k := layerKey(p.Name)
		if i > 0 && (k != key || k == "" && n >= limit) {
			ends = append(ends, i)
			n = 0
		}
		key = k
		n += p.Value.Bytes()
	}
	if len(ps) > 0 {
		ends = append(ends, len(ps))
	}
	return ends
}

// layerKey is the prefix of a dotted name up to its first all-digit part,
// "" when it has none.
func layerKey(name string) string {
	end := 0
	for part := range strings.SplitSeq(name, ".") {
		end += len(part)
		if part != "" && strings.Trim(part, "0123456789") == "" {
			return name[:end]
		}
		end++ // the dot
	}
	return ""
}
