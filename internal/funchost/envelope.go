package funchost

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/karpfunc/karpfunc/internal/localbus"
)

// The request envelope, written the way the Functions host writes it,
// quirks included, so the handler's lenient decoder meets them in every
// local run: strings and GUIDs inside an extra layer of quotes, numbers as
// strings, timestamps without an offset.

// HostVersion is the version the local host reports in its headers.
const HostVersion = "4.1040.300.25317"

// .NET's round-trip forms: without an offset for DateTime in UTC as the
// Service Bus extension writes it, and with Z for sys.UtcNow.
const (
	dotnetLocalLayout = "2006-01-02T15:04:05.9999999"
	dotnetUTCLayout   = "2006-01-02T15:04:05.9999999Z"
)

// doubleQuoted is how the host serializes a string-typed metadata value.
func doubleQuoted(s string) string {
	quoted, _ := json.Marshal(s)
	return string(quoted)
}

func sysMetadata(function string, now time.Time) map[string]any {
	return map[string]any{
		"MethodName": function,
		"UtcNow":     now.UTC().Format(dotnetUTCLayout),
		"RandGuid":   localbus.NewGUID(),
	}
}

func serviceBusRequest(fn *Function, d *localbus.Delivery, now time.Time) ([]byte, error) {
	props := d.Message.ApplicationProperties
	if props == nil {
		props = map[string]any{}
	}
	md := map[string]any{
		"DeliveryCount":         strconv.Itoa(d.DeliveryCount),
		"LockToken":             doubleQuoted(d.LockToken),
		"MessageId":             doubleQuoted(d.Message.ID),
		"SequenceNumber":        strconv.FormatInt(d.SequenceNumber, 10),
		"EnqueuedTimeUtc":       d.EnqueuedTime.UTC().Format(dotnetLocalLayout),
		"ExpiresAtUtc":          "9999-12-31T23:59:59.9999999",
		"ApplicationProperties": props,
		"UserProperties":        props,
		"Client":                map[string]any{"FullyQualifiedNamespace": "localhost", "Identifier": "funchost-" + fn.Name},
		"sys":                   sysMetadata(fn.Name, now),
	}
	if d.Message.SessionID != "" {
		md["SessionId"] = doubleQuoted(d.Message.SessionID)
	}
	if d.Message.ContentType != "" {
		md["ContentType"] = doubleQuoted(d.Message.ContentType)
	}
	return json.Marshal(map[string]any{
		"Data":     map[string]any{fn.Binding: string(d.Message.Body)},
		"Metadata": md,
	})
}

// timerStatus is what the host remembers of a timer between runs.
type timerStatus struct {
	last, next, lastUpdated time.Time
}

func timerRequest(fn *Function, status *timerStatus, pastDue bool, now time.Time) ([]byte, error) {
	var st any // null before the first run, as without a schedule monitor
	if status != nil {
		st = map[string]any{
			"Last":        status.last.UTC().Format(dotnetLocalLayout),
			"Next":        status.next.UTC().Format(dotnetLocalLayout),
			"LastUpdated": status.lastUpdated.UTC().Format(dotnetLocalLayout),
		}
	}
	return json.Marshal(map[string]any{
		"Data": map[string]any{fn.Binding: map[string]any{
			"Schedule":       map[string]any{"AdjustForDST": true},
			"ScheduleStatus": st,
			"IsPastDue":      pastDue,
		}},
		"Metadata": map[string]any{"sys": sysMetadata(fn.Name, now)},
	})
}
