package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/karpfunc/karpfunc/internal/otlpreceiver"
)

// functionsService is the service name the handler's spans carry.
const functionsService = "karpfunc-functions"

// invocationSuffix ends the name of the span each Function invocation
// opens ("Provision process").
const invocationSuffix = " process"

// invocation is one Function invocation's span and the time its
// descendants (API server and ARM requests) took, by span name.
type invocation struct {
	function   string
	start, end time.Time
	requests   map[string]*requestTotal
}

// requestTotal is how many requests of one kind an invocation made and
// their summed time (concurrent requests overlap, so the sum may exceed
// the invocation's wall time).
type requestTotal struct {
	name  string
	count int
	spent time.Duration
}

// profileInvocations groups the handler's spans under the invocation each
// belongs to.
func profileInvocations(spans []otlpreceiver.Span) []*invocation {
	byID := make(map[string]otlpreceiver.Span, len(spans))
	for _, span := range spans {
		byID[span.SpanID] = span
	}
	invocations := map[string]*invocation{}
	for _, span := range spans {
		if span.Service != functionsService || strings.HasSuffix(span.Name, invocationSuffix) {
			continue
		}
		root, ok := invocationOf(span, byID)
		if !ok {
			continue
		}
		inv := invocations[root.SpanID]
		if inv == nil {
			inv = &invocation{function: strings.TrimSuffix(root.Name, invocationSuffix), start: root.Start, end: root.End,
				requests: map[string]*requestTotal{}}
			invocations[root.SpanID] = inv
		}
		total := inv.requests[span.Name]
		if total == nil {
			total = &requestTotal{name: span.Name}
			inv.requests[span.Name] = total
		}
		total.count++
		total.spent += span.End.Sub(span.Start)
	}
	out := make([]*invocation, 0, len(invocations))
	for _, inv := range invocations {
		out = append(out, inv)
	}
	slices.SortFunc(out, func(left, right *invocation) int { return left.start.Compare(right.start) })
	return out
}

// invocationOf climbs span's parents to the invocation span it ran in.
func invocationOf(span otlpreceiver.Span, byID map[string]otlpreceiver.Span) (otlpreceiver.Span, bool) {
	for range 64 { // a parent chain is a few spans deep; the bound guards a cycle
		parent, ok := byID[span.ParentSpanID]
		if !ok {
			return otlpreceiver.Span{}, false
		}
		if parent.Service == functionsService && strings.HasSuffix(parent.Name, invocationSuffix) {
			return parent, true
		}
		span = parent
	}
	return otlpreceiver.Span{}, false
}

// printProvisionProfile writes each Provision pass of the burst (start
// after the Deployment's creation, wall time, requests) and, over all of
// them, the request kinds that took the most time.
func printProvisionProfile(out io.Writer, spans []otlpreceiver.Span, start time.Time, startEvent string) {
	var passes []*invocation
	for _, inv := range profileInvocations(spans) {
		if inv.function == "Provision" {
			passes = append(passes, inv)
		}
	}
	if len(passes) == 0 {
		fmt.Fprintln(out, "\nno Provision pass traced")
		return
	}
	fmt.Fprintf(out, "\nProvision passes (from the handler's traces): start after %s, wall time, API server and ARM requests in line\n", startEvent)
	overall := map[string]*requestTotal{}
	busy := time.Duration(0)
	for _, pass := range passes {
		count, spent := 0, time.Duration(0)
		for _, total := range pass.requests {
			count += total.count
			spent += total.spent
			sum := overall[total.name]
			if sum == nil {
				sum = &requestTotal{name: total.name}
				overall[total.name] = sum
			}
			sum.count += total.count
			sum.spent += total.spent
		}
		wall := pass.end.Sub(pass.start)
		busy += wall
		if wall >= time.Second {
			fmt.Fprintf(out, "  %6.1fs  %6.1fs  %4d requests, %6.1fs in them\n",
				pass.start.Sub(start).Seconds(), wall.Seconds(), count, spent.Seconds())
		}
	}
	fmt.Fprintf(out, "  (%d passes, %d shorter than 1 s not listed; %.1fs of passes in all)\n", len(passes), countShort(passes), busy.Seconds())
	kinds := make([]*requestTotal, 0, len(overall))
	for _, total := range overall {
		kinds = append(kinds, total)
	}
	slices.SortFunc(kinds, func(left, right *requestTotal) int { return cmp.Compare(right.spent, left.spent) })
	fmt.Fprintln(out, "  requests by kind, all passes: count, summed time, mean")
	for _, total := range kinds[:min(len(kinds), 8)] {
		fmt.Fprintf(out, "    %-58s %5d  %6.1fs  %4.0fms\n", total.name, total.count, total.spent.Seconds(),
			float64(total.spent.Milliseconds())/float64(total.count))
	}
}

func countShort(passes []*invocation) int {
	short := 0
	for _, pass := range passes {
		if pass.end.Sub(pass.start) < time.Second {
			short++
		}
	}
	return short
}
