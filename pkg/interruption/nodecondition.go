package interruption

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The node condition AKS's node-problem-detector sets from the VM's IMDS
// Scheduled Events when a spot eviction is coming.
const (
	ConditionPreemptionScheduled corev1.NodeConditionType = "PreemptionScheduled"
	// ReasonSpotEvictionIncoming is the condition's reason; informational
	// only (the type and status decide), so a renamed reason cannot turn
	// spot handling off.
	ReasonSpotEvictionIncoming = "SpotEvictionIncoming"
)

// The condition message forwards the Scheduled Event as
// "<EventType> <EventStatus>[: <NotBefore>]. For more information, see
// <link>. EventId: <GUID>", NotBefore in RFC 1123 GMT, e.g.
//
//	Preempt Scheduled: Sat, 01 Aug 2026 05:41:02 GMT. For more information, see https://aka.ms/... EventId: 40B7BD88-C56E-44E4-93F6-75CEDACE2869
var (
	eventIDRE = regexp.MustCompile(`(?i)EventId:\s*([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)
)

// NoticeKind is what a PreemptionScheduled message announces.
type NoticeKind int

const (
	// NoticePreemptScheduled: Preempt Scheduled, the VM goes at NotBefore.
	NoticePreemptScheduled NoticeKind = iota
	// NoticePreemptStarted: the eviction is under way; the deadline is now.
	NoticePreemptStarted
	// NoticeAdvisory: SpotRebalanceRecommendation, not an eviction.
	NoticeAdvisory
	// NoticeUnknown: a message this parser does not recognise; handled as
	// an eviction with the default notice (the condition itself says one
	// is coming).
	NoticeUnknown
)

// ParseNotice reads a PreemptionScheduled condition message. For a Preempt
// Scheduled notice it returns the NotBefore deadline; ok is false when that
// deadline is missing or unreadable (the caller assumes the default notice
// and says so). The EventId is returned when present.
func ParseNotice(message string) (kind NoticeKind, deadline time.Time, eventID string, ok bool) {
	msg := strings.Join(strings.Fields(message), " ")
	if match := eventIDRE.FindStringSubmatch(msg); match != nil {
		eventID = strings.ToUpper(match[1])
	}
	switch {
	case hasHeader(msg, "SpotRebalanceRecommendation Advisory"):
		return NoticeAdvisory, time.Time{}, eventID, false
	case hasHeader(msg, "Preempt Started"):
		return NoticePreemptStarted, time.Time{}, eventID, false
	case hasHeader(msg, "Preempt Scheduled"):
	default:
		return NoticeUnknown, time.Time{}, eventID, false
	}
	rest := strings.TrimSpace(strings.TrimPrefix(msg, "Preempt Scheduled"))
	rest, found := strings.CutPrefix(rest, ":")
	if !found {
		return NoticePreemptScheduled, time.Time{}, eventID, false
	}
	raw, _, _ := strings.Cut(strings.TrimSpace(rest), ".")
	raw = strings.TrimSpace(raw)
	// Only GMT/UTC: Go invents a zero offset for zone abbreviations it does
	// not know, which would silently shift the deadline.
	if zone := raw[strings.LastIndex(raw, " ")+1:]; zone != "GMT" && zone != "UTC" {
		return NoticePreemptScheduled, time.Time{}, eventID, false
	}
	for _, layout := range []string{time.RFC1123, "Mon, 2 Jan 2006 15:04:05 MST"} {
		if at, err := time.ParseInLocation(layout, raw, time.UTC); err == nil {
			return NoticePreemptScheduled, at.UTC(), eventID, true
		}
	}
	return NoticePreemptScheduled, time.Time{}, eventID, false
}

// hasHeader: msg starts with header followed by ":" or "." or its end.
func hasHeader(msg, header string) bool {
	rest, ok := strings.CutPrefix(msg, header)
	return ok && (rest == "" || rest[0] == ':' || rest[0] == '.')
}

// ParseNodeCondition turns a node's PreemptionScheduled condition into a
// Signal. now is when the notice was seen: a message without a readable
// deadline gets now + notice (DeadlineAssumed), "Preempt Started" gets now.
// A condition that is not PreemptionScheduled=True, or a rebalance
// advisory, is an IgnoredError.
func ParseNodeCondition(node, providerID string, cond corev1.NodeCondition, now time.Time, notice time.Duration) (Signal, error) {
	sig := Signal{Source: SourceNodeCondition, Node: node, ProviderID: providerID}
	if cond.Type != ConditionPreemptionScheduled || cond.Status != corev1.ConditionTrue {
		return sig, NewIgnoredError("node %s condition %s is %s", node, cond.Type, cond.Status)
	}
	if notice <= 0 {
		notice = DefaultNotice
	}
	kind, deadline, id, ok := ParseNotice(cond.Message)
	sig.EventID = id
	switch kind {
	case NoticeAdvisory:
		return sig, NewIgnoredError("node %s: %q is a rebalance advisory, not an eviction", node, cond.Message)
	case NoticePreemptStarted:
		sig.Deadline = now.UTC()
	case NoticePreemptScheduled, NoticeUnknown:
		if ok {
			sig.Deadline = deadline
		} else {
			sig.Deadline = now.Add(notice).UTC()
			sig.DeadlineAssumed = true
		}
	}
	sig.Detail = fmt.Sprintf("Azure is preempting the spot VM (node condition %s=True, %s)", cond.Type, cond.Reason)
	return sig, nil
}
