package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    flags
		wantErr string
	}{
		{name: "defaults", args: []string{"--cluster-name", "c1"},
			want: flags{cluster: "c1", batchIdle: time.Second, batchMax: 10 * time.Second, resync: 30 * time.Second,
				healthAddr: ":8081", logLevel: slog.LevelInfo, kubeQPS: 20, kubeBurst: 40}},
		{name: "everything", args: []string{"--cluster-name=c1", "--kubeconfig=/k", "--batch-idle-duration=2s", "--batch-max-duration=20s",
			"--resync=1m", "--health-probe-bind-address=", "--log-level=DEBUG", "--kube-api-qps=5", "--kube-api-burst=10"},
			want: flags{kubeconfig: "/k", cluster: "c1", batchIdle: 2 * time.Second, batchMax: 20 * time.Second, resync: time.Minute,
				logLevel: slog.LevelDebug, kubeQPS: 5, kubeBurst: 10}},
		{name: "cluster required", args: nil, wantErr: "--cluster-name is required"},
		{name: "idle above max", args: []string{"--cluster-name=c", "--batch-idle-duration=11s"}, wantErr: "--batch-idle-duration 11s is longer than --batch-max-duration 10s"},
		{name: "zero resync", args: []string{"--cluster-name=c", "--resync=0"}, wantErr: "must be positive"},
		{name: "bad duration", args: []string{"--cluster-name=c", "--resync=often"}, wantErr: `invalid value "often" for flag -resync`},
		{name: "bad log level", args: []string{"--cluster-name=c", "--log-level=LOUD"}, wantErr: "-log-level"},
		{name: "stray argument", args: []string{"--cluster-name=c", "extra"}, wantErr: "unexpected arguments: [extra]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFlags(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseFlags() = %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("parseFlags() = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestHealthServer(t *testing.T) {
	var ready atomic.Bool
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	srv := httptest.NewServer(healthServer("", &ready, metrics).Handler)
	defer srv.Close()
	get := func(path string) int {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tt := range []struct {
		ready      bool
		path       string
		wantStatus int
	}{
		{false, "/healthz", 200}, {false, "/readyz", 503}, {true, "/readyz", 200}, {true, "/metrics", http.StatusTeapot}, {true, "/other", 404},
	} {
		ready.Store(tt.ready)
		if got := get(tt.path); got != tt.wantStatus {
			t.Errorf("GET %s (ready=%v) = %d; want %d", tt.path, tt.ready, got, tt.wantStatus)
		}
	}
}
