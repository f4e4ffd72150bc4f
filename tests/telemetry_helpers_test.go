package tests

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/otlpreceiver"
	"github.com/karpfunc/karpfunc/pkg/decisions"
)

// checkTelemetry finds, in what the handler and the relay exported to rcv,
// one trace that runs from the relay's publish through the Provision
// function to the ARM VM creation (with Kubernetes calls in it), the
// metric series of a provisioning run with sensible values, and the launch
// decisions in the handler's log.
func checkTelemetry(t *testing.T, ctx context.Context, env *localenv.Env, rcv *otlpreceiver.Receiver) {
	claims := nodeClaimList(t, ctx, env.Kube)
	// The relay exports on its own schedule (every 500 ms for spans, 2 s
	// for metrics); the handler flushed before each invocation returned.
	var chain []otlpreceiver.Span
	eventually(t, 30*time.Second, "a trace from the relay's publish to an ARM VM create", func() (bool, string) {
		chain = traceToVMCreate(rcv.Spans())
		return chain != nil, "no ARM VM create span whose ancestors are Provision and the relay's publish yet"
	})
	var names []string
	for _, s := range chain {
		names = append(names, s.Service+":"+s.Name)
	}
	t.Logf("trace %s: %s", chain[0].TraceID, strings.Join(names, " <- "))
	kube := 0
	for _, s := range rcv.Spans() {
		if s.TraceID == chain[0].TraceID && strings.HasPrefix(s.Name, "kubernetes ") {
			kube++
		}
	}
	if kube == 0 {
		t.Errorf("trace %s has no Kubernetes API spans", chain[0].TraceID)
	}

	eventually(t, 30*time.Second, "the relay's pod histograms", func() (bool, string) {
		return histogramCount(rcv, "karpfunc_pods_time_to_capacity_seconds", nil) > 0 &&
			histogramCount(rcv, "karpenter_pods_startup_duration_seconds", nil) > 0, "not exported yet"
	})
	created := counter(rcv, "karpenter_nodeclaims_created_total", map[string]string{"reason": "provisioning"})
	if created < float64(len(claims)) || created == 0 {
		t.Errorf("karpenter_nodeclaims_created_total{reason=provisioning} = %v; want at least the %d NodeClaims that exist", created, len(claims))
	}
	for _, nc := range claims {
		pool := nc.Labels["karpenter.sh/nodepool"]
		if counter(rcv, "karpenter_nodeclaims_created_total", map[string]string{"nodepool": pool}) == 0 {
			t.Errorf("karpenter_nodeclaims_created_total has no series for NodePool %s", pool)
		}
	}
	if n := counter(rcv, "karpfunc_messages_total", map[string]string{"function": "Provision", "outcome": "success"}); n < 1 {
		t.Errorf("karpfunc_messages_total{function=Provision,outcome=success} = %v; want ≥ 1", n)
	}
	creates := histogramCount(rcv, "karpfunc_arm_request_duration_seconds", map[string]string{"operation": "virtualMachines.CreateOrUpdate", "error": ""})
	if creates < uint64(len(claims)) {
		t.Errorf("karpfunc_arm_request_duration_seconds{operation=virtualMachines.CreateOrUpdate} counts %d requests for %d NodeClaims", creates, len(claims))
	}
	for _, h := range []struct {
		name     string
		min, max float64 // bounds on the mean, seconds
	}{
		{"karpenter_scheduler_scheduling_duration_seconds", 0, 30},
		{"karpfunc_pods_pending_to_nodeclaim_seconds", 0, 120},
		{"karpfunc_function_duration_seconds", 0, 120},
		{"karpfunc_pods_time_to_capacity_seconds", 1, 180}, // a VM boots in 3 s here
		{"karpenter_pods_bound_duration_seconds", 1, 300},
		{"karpenter_pods_startup_duration_seconds", 1, 300},
	} {
		count, sum := histogram(rcv, h.name, nil)
		if count == 0 {
			t.Errorf("%s: no observations", h.name)
			continue
		}
		mean := sum / float64(count)
		t.Logf("%s: %d observations, mean %.2fs", h.name, count, mean)
		if mean < h.min || mean > h.max {
			t.Errorf("%s: mean %.2fs outside [%v, %v]", h.name, mean, h.min, h.max)
		}
	}

	// One decision line per launch, with the schema's fields.
	data, err := os.ReadFile(env.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	launched := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		i := strings.Index(line, "{")
		if i < 0 || !strings.Contains(line, decisions.Message) {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line[i:]), &rec); err != nil || rec["msg"] != decisions.Message {
			continue
		}
		if rec["decision"] != string(decisions.Launch) {
			continue
		}
		if rec["cluster"] != "e2e" || rec["size"] == "" || rec["zone"] == "" || rec["capacityType"] == "" || rec["pricePerHour"].(float64) <= 0 {
			t.Errorf("launch decision lacks a field: %s", line[i:])
		}
		launched[rec["nodeClaim"].(string)] = true
	}
	for _, nc := range claims {
		if !launched[nc.Name] {
			t.Errorf("NodeClaim %s has no launch decision in the log", nc.Name)
		}
	}
}

// traceToVMCreate returns a chain ARM VM create <- ... <- Provision process
// <- the relay's provision publish, all in one trace, or nil.
func traceToVMCreate(spans []otlpreceiver.Span) []otlpreceiver.Span {
	byID := map[string]otlpreceiver.Span{}
	for _, s := range spans {
		byID[s.TraceID+"/"+s.SpanID] = s
	}
	for _, s := range spans {
		if s.Name != "ARM virtualMachines.CreateOrUpdate" || s.Service != "karpfunc-functions" {
			continue
		}
		chain := []otlpreceiver.Span{s}
		sawProvision := false
		for cur := s; cur.ParentSpanID != ""; {
			parent, ok := byID[cur.TraceID+"/"+cur.ParentSpanID]
			if !ok {
				break
			}
			chain = append(chain, parent)
			if parent.Name == "Provision process" && parent.Service == "karpfunc-functions" {
				sawProvision = true
			}
			// The relay's provision publish, or its disruption publish when
			// the pass that writes a new NodePool's status asked for the
			// provisioning pass first (nodepoolstatus: became Ready).
			if sawProvision && strings.HasSuffix(parent.Name, " publish") && parent.Service == "karpfunc-relay" && parent.Kind == "SPAN_KIND_PRODUCER" {
				return chain
			}
			cur = parent
		}
	}
	return nil
}

func matches(attrs, want map[string]string) bool {
	for k, v := range want {
		if attrs[k] != v {
			return false
		}
	}
	return true
}

// latest keeps the last point of each series (exports are cumulative).
func latest(rcv *otlpreceiver.Receiver, name string, want map[string]string) []otlpreceiver.Point {
	series := map[string]otlpreceiver.Point{}
	for _, p := range rcv.Points(name) {
		if matches(p.Attributes, want) {
			b, _ := json.Marshal(p.Attributes)
			series[p.Service+string(b)] = p
		}
	}
	out := make([]otlpreceiver.Point, 0, len(series))
	for _, p := range series {
		out = append(out, p)
	}
	return out
}

func counter(rcv *otlpreceiver.Receiver, name string, want map[string]string) float64 {
	total := 0.0
	for _, p := range latest(rcv, name, want) {
		total += p.Value
	}
	return total
}

func histogram(rcv *otlpreceiver.Receiver, name string, want map[string]string) (uint64, float64) {
	var n uint64
	var sum float64
	for _, p := range latest(rcv, name, want) {
		n += p.Count
		sum += p.Sum
	}
	return n, sum
}

func histogramCount(rcv *otlpreceiver.Receiver, name string, want map[string]string) uint64 {
	n, _ := histogram(rcv, name, want)
	return n
}
