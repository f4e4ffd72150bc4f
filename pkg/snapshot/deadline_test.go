package snapshot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckTime(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Date(2025, 12, 2, 18, 0, 0, 0, time.UTC))
	defer cancelExpired()
	cases := []struct {
		name  string
		ctx   context.Context
		cause error
		says  string
	}{
		{"live", live, nil, ""},
		{"cancelled", cancelled, context.Canceled, "its context was cancelled"},
		{"past its deadline", expired, context.DeadlineExceeded, "its deadline 2025-12-02T18:00:00Z passed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTime(tc.ctx, "solve", time.Now())
			if tc.cause == nil {
				if err != nil {
					t.Fatalf("error %v on a live context", err)
				}
				return
			}
			var outOfTime *OutOfTimeError
			if !errors.As(err, &outOfTime) || !errors.Is(err, tc.cause) {
				t.Fatalf("error %v; want an OutOfTimeError wrapping %v", err, tc.cause)
			}
			for _, want := range []string{"during the solve", tc.says, "nothing was actuated"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
