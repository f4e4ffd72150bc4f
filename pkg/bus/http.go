package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxErrorBody bounds how much of an error response is quoted in the error,
// enough for the server's reason without flooding logs.
const maxErrorBody = 4 << 10

// httpPublisher is the client of the local Functions host's in-process bus.
//
// Contract: POST {baseURL}/queues/{queue}/messages with a JSON array of
// Message (Body base64-encoded, as encoding/json does for []byte) and the
// identity's credential as "Authorization: Bearer <credential>"; the server
// answers 202 Accepted once every message is enqueued, or an error status with
// a reason and enqueues nothing. 401 is Service Bus's unauthorized access
// (the identity has no Send claim on the queue, or no valid credential) and
// becomes an *UnauthorizedError.
type httpPublisher struct {
	base       string
	client     *http.Client
	credential string
}

// NewHTTPPublisher returns a Publisher that posts to the local bus at baseURL
// (for example "http://127.0.0.1:7072"). A nil client means
// http.DefaultClient; callers that need a timeout pass their own. It
// presents no credential: see NewHTTPPublisherWithCredential.
func NewHTTPPublisher(baseURL string, client *http.Client) Publisher {
	return NewHTTPPublisherWithCredential(baseURL, client, "")
}

// NewHTTPPublisherWithCredential is NewHTTPPublisher presenting credential,
// the local bus's token for the sending identity (KARPFUNC_LOCAL_BUS_CREDENTIAL).
func NewHTTPPublisherWithCredential(baseURL string, client *http.Client, credential string) Publisher {
	if client == nil {
		client = http.DefaultClient
	}
	return &httpPublisher{base: strings.TrimRight(baseURL, "/"), client: client, credential: credential}
}

func (p *httpPublisher) Publish(ctx context.Context, queue string, msgs ...Message) error {
	if err := ValidateMessages(queue, msgs); err != nil {
		return err
	}
	if p.base == "" {
		return errors.New("bus: local bus URL is empty")
	}
	body, err := json.Marshal(msgs)
	if err != nil {
		return fmt.Errorf("bus: encoding %d message(s) for queue %q: %w", len(msgs), queue, err)
	}
	endpoint := p.base + "/queues/" + url.PathEscape(queue) + "/messages"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("bus: request to local bus %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if p.credential != "" {
		req.Header.Set("Authorization", "Bearer "+p.credential)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("bus: publishing %d message(s) to queue %q at %s: %w", len(msgs), queue, endpoint, err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("bus: publishing %d message(s) to queue %q at %s: %w",
			len(msgs), queue, endpoint, &UnauthorizedError{Description: errorText(text)})
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("bus: publishing %d message(s) to queue %q at %s: %s: %s",
			len(msgs), queue, endpoint, resp.Status, strings.TrimSpace(string(text)))
	}
	return nil
}

// Close does nothing: the HTTP client's idle connections belong to its owner.
func (p *httpPublisher) Close(context.Context) error { return nil }

// errorText is the reason in a local bus error body ({"error": "..."}), or
// the body itself when it is not that JSON.
func errorText(body []byte) string {
	var reply struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &reply) == nil && reply.Error != "" {
		return reply.Error
	}
	return strings.TrimSpace(string(body))
}
