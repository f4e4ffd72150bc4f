package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// healthResourcesTopicType is the system topic type of Azure Resource
// Notifications' health resources events. A subscription holds at most one
// system topic of a type (Learn: "Azure Resource Notifications - Health
// Resources events in Azure Event Grid"; Event Grid refuses a second), so
// karpfunc reuses the one that exists.
const healthResourcesTopicType = "Microsoft.ResourceNotifications.HealthResources"

const eventGridAPIVersion = "2025-02-15"

// systemTopicPage is one page of ARM's Microsoft.EventGrid/systemTopics list.
type systemTopicPage struct {
	Value []struct {
		ID         string `json:"id"`
		Properties struct {
			TopicType string `json:"topicType"`
		} `json:"properties"`
	} `json:"value"`
	NextLink string `json:"nextLink"`
}

// findHealthTopic returns the ID of the page's HealthResources system topic
// (empty when none) and the next page's link.
func findHealthTopic(body []byte) (id, next string, err error) {
	var page systemTopicPage
	if err := json.Unmarshal(body, &page); err != nil {
		return "", "", fmt.Errorf("decoding the subscription's Event Grid system topics: %w", err)
	}
	for _, topic := range page.Value {
		if strings.EqualFold(topic.Properties.TopicType, healthResourcesTopicType) {
			return topic.ID, "", nil
		}
	}
	return "", page.NextLink, nil
}

// healthResourcesTopic lists the subscription's Event Grid system topics
// (every page) and returns the HealthResources one's ID, or "" when there
// is none and main.bicep creates it.
func healthResourcesTopic(ctx context.Context, arm *armClient, sub string) (string, error) {
	path := "/subscriptions/" + sub + "/providers/Microsoft.EventGrid/systemTopics?api-version=" + eventGridAPIVersion
	for path != "" {
		body, status, err := arm.do(ctx, http.MethodGet, path)
		if err != nil {
			return "", err
		}
		if status != http.StatusOK {
			return "", fmt.Errorf("listing the Event Grid system topics of subscription %s (to reuse its %s topic): HTTP %d: %s", sub, healthResourcesTopicType, status, body)
		}
		id, next, err := findHealthTopic(body)
		if err != nil || id != "" {
			return id, err
		}
		path, err = armPath(next)
		if err != nil {
			return "", err
		}
	}
	return "", nil
}

// armPath turns an ARM nextLink (an absolute URL) into the path and query
// armClient.do takes; "" stays "".
func armPath(link string) (string, error) {
	if link == "" {
		return "", nil
	}
	parsed, err := url.Parse(link)
	if err != nil || !strings.EqualFold(parsed.Host, "management.azure.com") {
		return "", fmt.Errorf("ARM returned a nextLink %q that is not a management.azure.com URL", link)
	}
	return parsed.RequestURI(), nil
}
