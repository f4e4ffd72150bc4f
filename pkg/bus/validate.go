package bus

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxIDLength is Service Bus's limit for MessageId and SessionId. The local
// bus enforces the same limit so an ID that works in development works in
// Azure too.
const MaxIDLength = 128

// ValidateMessages checks what every transport requires before anything is
// sent, so a bad message fails with a reason naming it instead of being
// half-sent, silently renamed by the broker, or rejected deep inside AMQP.
// Both publishers call it; the local bus server can call it too.
func ValidateMessages(queue string, msgs []Message) error {
	if queue == "" {
		return errors.New("bus: queue name is empty")
	}
	if len(msgs) == 0 {
		return fmt.Errorf("bus: no messages to publish to queue %q", queue)
	}
	var errs []error
	seen := make(map[string]int, len(msgs))
	for i, msg := range msgs {
		if err := validateMessage(msg); err != nil {
			errs = append(errs, fmt.Errorf("message %d (id %q): %w", i, msg.ID, err))
			continue
		}
		// Two messages with one ID in one call is a caller bug: duplicate
		// detection would keep only the first, dropping the second unnoticed.
		if first, ok := seen[msg.ID]; ok {
			errs = append(errs, fmt.Errorf("message %d (id %q): same id as message %d", i, msg.ID, first))
		}
		seen[msg.ID] = i
	}
	if len(errs) > 0 {
		return fmt.Errorf("bus: invalid messages for queue %q: %w", queue, errors.Join(errs...))
	}
	return nil
}

func validateMessage(m Message) error {
	switch {
	case m.ID == "":
		// Service Bus would invent an ID, which defeats duplicate detection.
		return errors.New("id is empty")
	case len(m.ID) > MaxIDLength:
		return fmt.Errorf("id is %d characters; Service Bus allows at most %d", len(m.ID), MaxIDLength)
	case !utf8.ValidString(m.ID):
		return errors.New("id is not valid UTF-8")
	case len(m.SessionID) > MaxIDLength:
		return fmt.Errorf("sessionId is %d characters; Service Bus allows at most %d", len(m.SessionID), MaxIDLength)
	case len(m.Body) == 0:
		return errors.New("body is empty")
	}
	for key, value := range m.ApplicationProperties {
		if key == "" {
			return errors.New("application property with an empty name")
		}
		if err := validatePropertyValue(value); err != nil {
			return fmt.Errorf("application property %q: %w", key, err)
		}
	}
	return nil
}

// validatePropertyValue accepts the value types Service Bus stores as
// application properties (AMQP primitives). Anything else would fail at send
// time inside the AMQP encoder, after other messages may have gone out.
func validatePropertyValue(v any) error {
	switch v.(type) {
	case nil, string, bool,
		int, int8, int16, int32, int64,
		uint, uint8, uint16, uint32, uint64,
		float32, float64, time.Time, []byte:
		return nil
	default:
		return fmt.Errorf("value of type %T is not supported; use a string, number, bool, time.Time or []byte", v)
	}
}
