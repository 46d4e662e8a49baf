package filter

import (
	"context"
	"fmt"
	"slices"
)

// chain is the Filter Chain returns.
type chain struct {
	filters []Filter
	infos   []Info // of filters, read once
}

// Chain returns a filter that runs filters in order: each sees the previous
// one's output, and the chain returns the last one's. For each kind only the
// filters whose Info handles it are called, and the chain stops early once
// nothing is left, so a filter is never called with an empty batch by a
// chain. With no filter handling a kind, the chain returns its input.
//
// After each call the chain checks the output with VerifyOutput; a filter
// that returns items it was not given fails the call with ErrInvalidOutput.
// Errors name the filter, its position and the mirror.
//
// Chains passed to Chain are flattened. Info of the chain is named "chain"
// and handles the union of its filters' kinds. Chain reads every filter's
// Info once, here. A nil filter is a programming error and panics.
func Chain(filters ...Filter) Filter {
	c := &chain{}
	for i, f := range filters {
		switch f := f.(type) {
		case nil:
			panic(fmt.Sprintf("filter.Chain: filter %d of %d is nil", i+1, len(filters)))
		case *chain:
			c.filters = append(c.filters, f.filters...)
			c.infos = append(c.infos, f.infos...)
		default:
			c.filters = append(c.filters, f)
			c.infos = append(c.infos, f.Info())
		}
	}
	return c
}

// Info implements Filter.
func (c *chain) Info() Info {
	i := Info{Name: "chain", ProtocolMajor: ProtocolMajor, ProtocolMinor: ProtocolMinor}
	for _, k := range AllKinds() {
		if slices.ContainsFunc(c.infos, func(fi Info) bool { return fi.Handles(k) }) {
			i.Kinds = append(i.Kinds, k)
		}
	}
	return i
}

// FilterTopics implements Filter.
func (c *chain) FilterTopics(ctx context.Context, mirror string, in []Topic) ([]Topic, error) {
	return runChain(ctx, c, Topics, mirror, in, Filter.FilterTopics)
}

// FilterGroups implements Filter.
func (c *chain) FilterGroups(ctx context.Context, mirror string, in []Group) ([]Group, error) {
	return runChain(ctx, c, Groups, mirror, in, Filter.FilterGroups)
}

// FilterACLs implements Filter.
func (c *chain) FilterACLs(ctx context.Context, mirror string, in []ACLBinding) ([]ACLBinding, error) {
	return runChain(ctx, c, ACLs, mirror, in, Filter.FilterACLs)
}

func runChain[T Item](ctx context.Context, c *chain, kind Kind, mirror string, in []T,
	call func(Filter, context.Context, string, []T) ([]T, error)) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filter chain: %s of mirror %q: %w", kind, mirror, err)
	}
	cur := in
	for i, f := range c.filters {
		if len(cur) == 0 {
			break
		}
		if !c.infos[i].Handles(kind) {
			continue
		}
		out, err := call(f, ctx, mirror, cur)
		if err == nil {
			err = VerifyOutput(cur, out)
		}
		if err != nil {
			return nil, fmt.Errorf("filter %q (%d of %d in the chain) on %d %s of mirror %q: %w",
				c.infos[i].Name, i+1, len(c.filters), len(cur), kind, mirror, err)
		}
		cur = out
	}
	return cur, nil
}
