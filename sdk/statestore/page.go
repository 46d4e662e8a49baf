package statestore

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Pager is implemented by stores that list one page at a time natively
// (without reading every matching entry for each page). It is optional:
// [ListPage] pages over List for stores without it.
type Pager interface {
	// ListPage returns, sorted by key in byte order, at most limit
	// entries whose key starts with prefix and sorts strictly after after
	// ("" starts at the first key). more reports whether entries may
	// follow the last one returned: the next page starts after its key. A
	// store may return fewer than limit entries with more set (to bound a
	// page's size), but never an empty page with more set. A limit below 1
	// fails with an error wrapping ErrInvalidArgument.
	//
	// Each entry is consistent by itself; pages are not a snapshot of the
	// store, exactly as List is not: a key written between two pages shows
	// up in a later page if it sorts after the cursor.
	ListPage(ctx context.Context, prefix, after string, limit int) (page []Entry, more bool, err error)
}

// ValidateLimit checks a page limit: at least 1. The error wraps
// ErrInvalidArgument.
func ValidateLimit(limit int) error {
	if limit < 1 {
		return fmt.Errorf("%w: page limit %d (at least 1)", ErrInvalidArgument, limit)
	}
	return nil
}

// ListPage returns one page of s's entries under prefix after the key after:
// s.ListPage if s implements [Pager], else a page cut from s.List (which
// reads every matching entry for each page; a store that holds much state
// should implement Pager).
func ListPage(ctx context.Context, s Store, prefix, after string, limit int) ([]Entry, bool, error) {
	if p, ok := s.(Pager); ok {
		return p.ListPage(ctx, prefix, after, limit)
	}
	if err := ValidateLimit(limit); err != nil {
		return nil, false, err
	}
	all, err := s.List(ctx, prefix)
	if err != nil {
		return nil, false, err
	}
	page, more := cutPage(all, after, limit)
	return page, more, nil
}

// cutPage returns the page of sorted that ListPage returns: at most limit
// entries whose key sorts after after, and whether more follow. sorted is
// sorted by key; the page shares its backing array.
func cutPage(sorted []Entry, after string, limit int) ([]Entry, bool) {
	start := 0
	if after != "" {
		start = sort.Search(len(sorted), func(i int) bool { return sorted[i].Key > after })
	}
	rest := sorted[start:]
	if len(rest) > limit {
		return rest[:limit], true
	}
	return rest, false
}

// ListAll lists every entry under prefix with p.ListPage, limit entries at a
// time, and returns them in key order: a List for stores whose natural
// operation is a page (and the RPC client's List). The result is not a
// snapshot (see Pager).
func ListAll(ctx context.Context, p Pager, prefix string, limit int) ([]Entry, error) {
	var out []Entry
	after := ""
	for {
		page, more, err := p.ListPage(ctx, prefix, after, limit)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if !strings.HasPrefix(e.Key, prefix) || e.Key <= after {
				return nil, fmt.Errorf("list %q: page after %q returned key %q out of order or outside the prefix", prefix, after, e.Key)
			}
			after = e.Key
		}
		out = append(out, page...)
		if !more {
			return out, nil
		}
		if len(page) == 0 {
			return nil, fmt.Errorf("list %q: empty page after %q announced more entries", prefix, after)
		}
	}
}
