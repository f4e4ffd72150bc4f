package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// podListsServed counts the pod LIST requests the API server has answered
// from its watch cache and from etcd (apiserver_storage_list_total). A
// paged LIST's later pages go to etcd when the cache holds no snapshot at
// or before the list's resourceVersion (after an etcd compaction in a
// cluster whose pods have not changed since), and then cost the API server
// about twice the CPU: the figure says which a pass got.
type podListsServed struct {
	http *http.Client
	url  string
}

func newPodListsServed(cfg *rest.Config) (*podListsServed, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &podListsServed{http: httpClient, url: strings.TrimSuffix(cfg.Host, "/") + "/metrics"}, nil
}

// read returns the counts so far, by storage ("watchcache", "etcd").
func (p *podListsServed) read(ctx context.Context) (map[string]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	counts := map[string]int64{}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		storage, count, ok := podListLine(lines.Text())
		if ok {
			counts[storage] += count
		}
	}
	return counts, lines.Err()
}

// podListLine parses an apiserver_storage_list_total sample of pods.
func podListLine(line string) (storage string, count int64, ok bool) {
	sample, isList := strings.CutPrefix(line, "apiserver_storage_list_total{")
	labels, value, found := strings.Cut(sample, "} ")
	if !isList || !found || !strings.Contains(labels, `resource="pods"`) || !strings.Contains(labels, `group=""`) {
		return "", 0, false
	}
	_, rest, found := strings.Cut(labels, `storage="`)
	if !found {
		return "", 0, false
	}
	storage, _, _ = strings.Cut(rest, `"`)
	parsed, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return "", 0, false
	}
	return storage, int64(parsed), true
}

// since describes the pod LISTs served between before and after.
func servedSince(before, after map[string]int64) string {
	return fmt.Sprintf("pod LISTs served by the watch cache %d, by etcd %d",
		after["watchcache"]-before["watchcache"], after["etcd"]-before["etcd"])
}
