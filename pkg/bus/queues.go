package bus

import (
	"context"
	"fmt"
	"regexp"
)

// App settings that name the queues. The Functions' triggers bind to the
// same settings (queueName "%PROVISION_QUEUE%" in function.json), so the
// relay, the handler and its scheduled self-messages all publish where
// the triggers listen.
const (
	EnvProvisionQueue    = "PROVISION_QUEUE"
	EnvLifecycleQueue    = "LIFECYCLE_QUEUE"
	EnvInterruptionQueue = "INTERRUPTION_QUEUE"
	EnvDisruptionQueue   = "DISRUPTION_QUEUE"
)

// QueueNames maps the logical queues publishers name (QueueProvision,
// QueueLifecycle, QueueInterruption) to the Service Bus entities.
type QueueNames map[string]string

var queueSettings = []struct{ logical, env string }{
	{QueueProvision, EnvProvisionQueue},
	{QueueLifecycle, EnvLifecycleQueue},
	{QueueInterruption, EnvInterruptionQueue},
	{QueueDisruption, EnvDisruptionQueue},
}

// Service Bus queue names: letters, digits, '.', '-', '_', '/', starting
// and ending with a letter or digit ('_' may end it), at most 260.
var entityNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._\-/]{0,258}[A-Za-z0-9_])?$`)

// QueueNamesFromEnv reads the queue settings; an unset one keeps the
// logical name (the name the deployment creates by default).
func QueueNamesFromEnv(getenv func(string) string) (QueueNames, error) {
	names := QueueNames{}
	for _, setting := range queueSettings {
		name := getenv(setting.env)
		if name == "" {
			name = setting.logical
		}
		if !entityNameRE.MatchString(name) {
			return nil, fmt.Errorf("app setting %s=%q is not a Service Bus queue name (letters, digits, '.', '-', '_', '/', starting and ending with a letter or digit, at most 260 characters)", setting.env, name)
		}
		names[setting.logical] = name
	}
	return names, nil
}

// WithQueueNames returns a Publisher that sends to the entity names maps to;
// queues it does not map are sent to as named.
func WithQueueNames(p Publisher, names QueueNames) Publisher {
	return renaming{p, names}
}

type renaming struct {
	Publisher
	names QueueNames
}

func (r renaming) Publish(ctx context.Context, queue string, msgs ...Message) error {
	if name, ok := r.names[queue]; ok {
		queue = name
	}
	return r.Publisher.Publish(ctx, queue, msgs...)
}
