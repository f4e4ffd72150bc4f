package messages

import (
	"errors"
	"fmt"
)

// InvalidError means a message can never be processed, however often it is
// retried: it is malformed or of an unknown type. Handlers answer it with a
// 4xx so the reason travels to the dead-letter queue.
type InvalidError struct{ msg string }

func (e *InvalidError) Error() string { return "invalid message: " + e.msg }

// NewInvalidError formats an InvalidError.
func NewInvalidError(format string, args ...any) error {
	return &InvalidError{msg: fmt.Sprintf(format, args...)}
}

// IsInvalid reports whether err is, or wraps, an InvalidError.
func IsInvalid(err error) bool {
	var invalid *InvalidError
	return errors.As(err, &invalid)
}
