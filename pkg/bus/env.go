package bus

import (
	"context"
	"errors"
	"net/http"
	"os"
	"time"
)

// Environment variables FromEnv reads. The ServiceBusConnection names are the
// Functions host's own app settings for the trigger connection, so a Function
// that publishes (scheduled liveness checks) needs no extra configuration.
const (
	EnvLocalBusURL = "KARPFUNC_LOCAL_BUS_URL"
	// EnvLocalBusCredential is the local bus's token for this process's
	// identity (the local stand-in for its managed identity's token); the
	// bus authorizes each send against QueueRights with it.
	EnvLocalBusCredential   = "KARPFUNC_LOCAL_BUS_CREDENTIAL"
	EnvServiceBusConnection = "ServiceBusConnection"
	EnvServiceBusNamespace  = "ServiceBusConnection__fullyQualifiedNamespace"
	EnvServiceBusClientID   = "ServiceBusConnection__clientId"
)

// localBusTimeout bounds one POST to the local bus; it is on loopback, so a
// slow answer means a stuck host and the caller's retry should take over.
const localBusTimeout = 30 * time.Second

// FromEnv picks the publisher the environment configures, in this order:
// KARPFUNC_LOCAL_BUS_URL (the local Functions host, with the identity's
// KARPFUNC_LOCAL_BUS_CREDENTIAL), ServiceBusConnection (a
// connection string), ServiceBusConnection__fullyQualifiedNamespace (with an
// Azure identity, ServiceBusConnection__clientId optional). Queue names
// come from PROVISION_QUEUE, LIFECYCLE_QUEUE and INTERRUPTION_QUEUE, the
// settings the Functions' triggers bind to.
func FromEnv() (Publisher, error) { return fromEnv(os.Getenv) }

func fromEnv(getenv func(string) string) (Publisher, error) {
	names, err := QueueNamesFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	pub, err := transportFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	return WithQueueNames(pub, names), nil
}

func transportFromEnv(getenv func(string) string) (Publisher, error) {
	if localURL := getenv(EnvLocalBusURL); localURL != "" {
		return NewHTTPPublisherWithCredential(localURL, &http.Client{Timeout: localBusTimeout}, getenv(EnvLocalBusCredential)), nil
	}
	if cs := getenv(EnvServiceBusConnection); cs != "" {
		return NewServiceBusPublisher(context.Background(), ServiceBusOptions{ConnectionString: cs})
	}
	if ns := getenv(EnvServiceBusNamespace); ns != "" {
		return NewServiceBusPublisher(context.Background(), ServiceBusOptions{Namespace: ns, ClientID: getenv(EnvServiceBusClientID)})
	}
	return nil, errors.New("bus: no message bus configured: set " + EnvLocalBusURL + " (local bus URL), " +
		EnvServiceBusConnection + " (Service Bus connection string), or " + EnvServiceBusNamespace +
		" (Service Bus namespace FQDN, with " + EnvServiceBusClientID + " for a user-assigned identity)")
}
