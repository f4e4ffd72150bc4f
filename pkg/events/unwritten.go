package events

import (
	"fmt"
	"slices"
	"strings"
)

// Unwritten counts the events a pass chose not to write (a rate limit, a
// bound per pass), by reason and cause, so the pass can say so in one log
// line: nothing is left out without a word. Duplicates within their dedupe
// window are not counted; they were written before.
type Unwritten map[UnwrittenKey]int

// UnwrittenKey is a reason and why events of it were not written.
type UnwrittenKey struct {
	Reason string
	Cause  string
}

// Add counts count events of reason not written, because of cause.
func (u *Unwritten) Add(reason, cause string, count int) {
	if count <= 0 {
		return
	}
	if *u == nil {
		*u = Unwritten{}
	}
	(*u)[UnwrittenKey{Reason: reason, Cause: cause}] += count
}

// Total is how many events were not written.
func (u Unwritten) Total() int {
	total := 0
	for _, count := range u {
		total += count
	}
	return total
}

// String lists the counts by reason, as "Nominated: 990 (cause); ...".
func (u Unwritten) String() string {
	keys := make([]UnwrittenKey, 0, len(u))
	for key := range u {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b UnwrittenKey) int {
		return strings.Compare(a.Reason+"\x00"+a.Cause, b.Reason+"\x00"+b.Cause)
	})
	parts := make([]string, 0, len(keys))
	for _, key := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d (%s)", key.Reason, u[key], key.Cause))
	}
	return strings.Join(parts, "; ")
}
