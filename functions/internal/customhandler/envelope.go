// Package customhandler is the handler side of the Azure Functions custom
// handler protocol: it decodes the host's invocation envelope, runs a
// function, and answers with the response the host expects, so that a failed
// invocation is retried and finally dead-lettered, its reason on stderr
// (the host drops a failed answer's Logs).
//
// The host JSON-encodes Metadata values loosely: strings and GUIDs may arrive
// with one or two layers of quotes, numbers as strings, and .NET timestamps
// without an offset. Everything here decodes those forms leniently but never
// guesses: a value that cannot be read is an error naming the field.
package customhandler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

// Invocation is one request from the Functions host.
type Invocation struct {
	// Data holds the trigger and input bindings by binding name, undecoded:
	// a Service Bus message usually arrives as a JSON string, a timer as an
	// object.
	Data map[string]json.RawMessage
	// Metadata is the trigger metadata.
	Metadata Metadata
	// InvocationID is the X-Azure-Functions-InvocationId header.
	InvocationID string

	outputs     map[string]any
	returnValue any
}

// Metadata is the trigger metadata karpfunc uses. Fields a trigger does not
// send stay zero; Raw keeps every entry for anything not typed here.
type Metadata struct {
	DeliveryCount         int
	SequenceNumber        int64
	MessageID             string
	SessionID             string
	LockToken             string
	ContentType           string
	EnqueuedTimeUTC       time.Time
	ApplicationProperties map[string]any
	Sys                   Sys
	Raw                   map[string]json.RawMessage
}

// Sys is the host's "sys" metadata, present on every trigger.
type Sys struct {
	MethodName string
	UtcNow     time.Time
	RandGUID   string `json:"RandGuid"`
}

// envelope is the request body.
type envelope struct {
	Data     map[string]json.RawMessage `json:"Data"`
	Metadata json.RawMessage            `json:"Metadata"`
}

// DecodeInvocation parses a request body from the host. The error is an
// InvalidError: an envelope that cannot be read now never will be.
func DecodeInvocation(body []byte, invocationID string) (*Invocation, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, messages.NewInvalidError("request body is not a Functions invocation envelope: %v", err)
	}
	inv := &Invocation{Data: env.Data, InvocationID: invocationID}
	if inv.Data == nil {
		inv.Data = map[string]json.RawMessage{}
	}
	if len(env.Metadata) > 0 && !isNull(env.Metadata) {
		md, err := decodeMetadata(env.Metadata)
		if err != nil {
			return nil, err
		}
		inv.Metadata = md
	}
	return inv, nil
}

// Message returns the Service Bus message body bound to binding. The host
// usually sends the body as a JSON string (unquoted here, twice if it was
// quoted twice); a body it already parsed arrives as an object or array and
// is returned as is.
func (inv *Invocation) Message(binding string) ([]byte, error) {
	raw, err := inv.binding(binding)
	if err != nil {
		return nil, err
	}
	raw = bytes.TrimSpace(raw)
	switch {
	case isNull(raw) || len(raw) == 0:
		return nil, messages.NewInvalidError("binding %q is null: the message has no body", binding)
	case raw[0] == '"':
		text, err := unquoteLenient(raw)
		if err != nil {
			return nil, messages.NewInvalidError("binding %q: %v", binding, err)
		}
		return []byte(text), nil
	default:
		return raw, nil
	}
}

// TimerInfo is the timerTrigger binding value.
type TimerInfo struct {
	Schedule struct {
		AdjustForDST bool
	}
	// ScheduleStatus is nil when the host has no schedule monitor.
	ScheduleStatus *ScheduleStatus
	IsPastDue      bool
}

// ScheduleStatus is the timer's last and next occurrences.
type ScheduleStatus struct {
	Last, Next, LastUpdated time.Time
}

// Timer decodes the timerTrigger value bound to binding.
func (inv *Invocation) Timer(binding string) (TimerInfo, error) {
	raw, err := inv.binding(binding)
	if err != nil {
		return TimerInfo{}, err
	}
	obj, err := objectLenient(raw)
	if err != nil {
		return TimerInfo{}, messages.NewInvalidError("timer binding %q: %v", binding, err)
	}
	var ti TimerInfo
	if ti.Schedule.AdjustForDST, err = timerSchedule(obj); err != nil {
		return ti, messages.NewInvalidError("timer binding %q: %v", binding, err)
	}
	if value, ok := lookup(obj, "IsPastDue"); ok {
		if ti.IsPastDue, err = boolLenient(value); err != nil {
			return ti, messages.NewInvalidError("timer binding %q: IsPastDue: %v", binding, err)
		}
	}
	if ti.ScheduleStatus, err = scheduleStatus(obj); err != nil {
		return ti, messages.NewInvalidError("timer binding %q: %v", binding, err)
	}
	return ti, nil
}

// timerSchedule reads Schedule.AdjustForDST (false when absent).
func timerSchedule(obj map[string]json.RawMessage) (bool, error) {
	raw, ok := lookup(obj, "Schedule")
	if !ok || isNull(raw) {
		return false, nil
	}
	schedule, err := objectLenient(raw)
	if err != nil {
		return false, fmt.Errorf("Schedule: %w", err)
	}
	value, ok := lookup(schedule, "AdjustForDST")
	if !ok {
		return false, nil
	}
	adjust, err := boolLenient(value)
	if err != nil {
		return false, fmt.Errorf("Schedule.AdjustForDST: %w", err)
	}
	return adjust, nil
}

// scheduleStatus reads ScheduleStatus (nil when absent or null).
func scheduleStatus(obj map[string]json.RawMessage) (*ScheduleStatus, error) {
	raw, ok := lookup(obj, "ScheduleStatus")
	if !ok || isNull(raw) {
		return nil, nil
	}
	fields, err := objectLenient(raw)
	if err != nil {
		return nil, fmt.Errorf("ScheduleStatus: %w", err)
	}
	status := &ScheduleStatus{}
	for name, dst := range map[string]*time.Time{"Last": &status.Last, "Next": &status.Next, "LastUpdated": &status.LastUpdated} {
		if value, ok := lookup(fields, name); ok {
			if *dst, err = timeLenient(value); err != nil {
				return nil, fmt.Errorf("ScheduleStatus.%s: %w", name, err)
			}
		}
	}
	return status, nil
}

// SetOutput sets the value of output binding name in the response.
func (inv *Invocation) SetOutput(name string, v any) {
	if inv.outputs == nil {
		inv.outputs = map[string]any{}
	}
	inv.outputs[name] = v
}

// SetReturnValue sets the response's ReturnValue ($return binding).
func (inv *Invocation) SetReturnValue(v any) { inv.returnValue = v }

func (inv *Invocation) binding(name string) (json.RawMessage, error) {
	raw, ok := inv.Data[name]
	if !ok {
		return nil, messages.NewInvalidError("no binding %q in the request Data (have %s)", name, keys(inv.Data))
	}
	return raw, nil
}

func decodeMetadata(raw json.RawMessage) (Metadata, error) {
	var md Metadata
	obj, err := objectLenient(raw)
	if err != nil {
		return md, messages.NewInvalidError("Metadata: %v", err)
	}
	md.Raw = obj
	field := func(name string, decode func(json.RawMessage) error) error {
		value, ok := lookup(obj, name)
		if !ok || isNull(value) {
			return nil
		}
		if err := decode(value); err != nil {
			return messages.NewInvalidError("Metadata.%s: %v", name, err)
		}
		return nil
	}
	str := func(dst *string) func(json.RawMessage) error {
		return func(v json.RawMessage) (err error) { *dst, err = stringLenient(v); return err }
	}
	steps := []error{
		field("DeliveryCount", func(v json.RawMessage) error {
			count, err := intLenient(v)
			md.DeliveryCount = int(count)
			return err
		}),
		field("SequenceNumber", func(v json.RawMessage) (err error) { md.SequenceNumber, err = intLenient(v); return err }),
		field("MessageId", str(&md.MessageID)),
		field("SessionId", str(&md.SessionID)),
		field("LockToken", str(&md.LockToken)),
		field("ContentType", str(&md.ContentType)),
		field("EnqueuedTimeUtc", func(v json.RawMessage) (err error) { md.EnqueuedTimeUTC, err = timeLenient(v); return err }),
		field("ApplicationProperties", func(v json.RawMessage) (err error) {
			md.ApplicationProperties, err = propertiesLenient(v)
			return err
		}),
		field("sys", func(v json.RawMessage) (err error) { md.Sys, err = decodeSys(v); return err }),
	}
	for _, err := range steps {
		if err != nil {
			return md, err
		}
	}
	// Older extensions call them UserProperties.
	if md.ApplicationProperties == nil {
		if err := field("UserProperties", func(v json.RawMessage) (err error) {
			md.ApplicationProperties, err = propertiesLenient(v)
			return err
		}); err != nil {
			return md, err
		}
	}
	return md, nil
}

func decodeSys(raw json.RawMessage) (Sys, error) {
	var sys Sys
	obj, err := objectLenient(raw)
	if err != nil {
		return sys, err
	}
	if value, ok := lookup(obj, "MethodName"); ok && !isNull(value) {
		if sys.MethodName, err = stringLenient(value); err != nil {
			return sys, fmt.Errorf("MethodName: %w", err)
		}
	}
	if value, ok := lookup(obj, "UtcNow"); ok && !isNull(value) {
		if sys.UtcNow, err = timeLenient(value); err != nil {
			return sys, fmt.Errorf("UtcNow: %w", err)
		}
	}
	if value, ok := lookup(obj, "RandGuid"); ok && !isNull(value) {
		if sys.RandGUID, err = stringLenient(value); err != nil {
			return sys, fmt.Errorf("RandGuid: %w", err)
		}
	}
	return sys, nil
}

// lookup finds key in obj, exactly or else case-insensitively: the host's
// casing of metadata names ("sys", "MessageId") is not part of any contract.
func lookup(obj map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	if value, ok := obj[key]; ok {
		return value, true
	}
	for name, value := range obj {
		if strings.EqualFold(name, key) {
			return value, true
		}
	}
	return nil, false
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// unquoteLenient decodes a JSON string, and decodes the result once more if
// it is itself a quoted JSON string (the host's `"\"value\""` form).
func unquoteLenient(raw json.RawMessage) (string, error) {
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return "", fmt.Errorf("not a JSON string: %s", abbreviate(raw))
	}
	if len(text) >= 2 && text[0] == '"' && text[len(text)-1] == '"' {
		var inner string
		if err := json.Unmarshal([]byte(text), &inner); err == nil {
			return inner, nil
		}
	}
	return text, nil
}

// stringLenient reads a string sent as a (possibly doubly) quoted JSON
// string or as a bare number.
func stringLenient(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", fmt.Errorf("empty value")
	}
	switch first := raw[0]; {
	case first == '"':
		return unquoteLenient(raw)
	case first == '-' || (first >= '0' && first <= '9'):
		var number json.Number
		if err := json.Unmarshal(raw, &number); err != nil {
			return "", fmt.Errorf("not a string or number: %s", abbreviate(raw))
		}
		return number.String(), nil
	default:
		return "", fmt.Errorf("want a string, got %s", abbreviate(raw))
	}
}

func intLenient(raw json.RawMessage) (int64, error) {
	text, err := stringLenient(raw)
	if err != nil {
		return 0, err
	}
	parsed, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer, got %q", text)
	}
	return parsed, nil
}

func boolLenient(raw json.RawMessage) (bool, error) {
	raw = bytes.TrimSpace(raw)
	var flag bool
	if err := json.Unmarshal(raw, &flag); err == nil {
		return flag, nil
	}
	text, err := stringLenient(raw)
	if err != nil {
		return false, err
	}
	flag, err = strconv.ParseBool(strings.TrimSpace(text))
	if err != nil {
		return false, fmt.Errorf("want a boolean, got %q", text)
	}
	return flag, nil
}

// timeLayouts are the forms .NET writes a DateTime or DateTimeOffset in.
// Layouts without an offset are read as UTC, as the host means them.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"01/02/2006 15:04:05 -07:00",
	"01/02/2006 15:04:05",
}

func timeLenient(raw json.RawMessage) (time.Time, error) {
	text, err := stringLenient(raw)
	if err != nil {
		return time.Time{}, err
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return time.Time{}, nil
	}
	for _, layout := range timeLayouts {
		if parsed, err := time.ParseInLocation(layout, text, time.UTC); err == nil {
			return parsed.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not a timestamp: %q", text)
}

// objectLenient reads a JSON object, or a JSON string that holds one.
func objectLenient(raw json.RawMessage) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		text, err := unquoteLenient(raw)
		if err != nil {
			return nil, err
		}
		raw = json.RawMessage(strings.TrimSpace(text))
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("want a JSON object, got %s", abbreviate(raw))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	return obj, nil
}

func propertiesLenient(raw json.RawMessage) (map[string]any, error) {
	obj, err := objectLenient(raw)
	if err != nil {
		return nil, err
	}
	props := make(map[string]any, len(obj))
	for name, value := range obj {
		var val any
		dec := json.NewDecoder(bytes.NewReader(value))
		dec.UseNumber() // keep int64 properties exact
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		props[name] = val
	}
	return props, nil
}

func abbreviate(raw []byte) string {
	const limit = 80
	if len(raw) > limit {
		return string(raw[:limit]) + "…"
	}
	if len(raw) == 0 {
		return "nothing"
	}
	return string(raw)
}

func keys(m map[string]json.RawMessage) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
