package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Flex Consumption's default functionTimeout, when neither host.json nor
// its app-setting override names one
// (https://learn.microsoft.com/azure/azure-functions/functions-scale#timeout).
const defaultFunctionTimeout = 30 * time.Minute

// passMargin is kept between a pass's deadline and the host's
// functionTimeout: time to log the failure and publish continuations
// before the host abandons the invocation.
const passMargin = 30 * time.Second

// functionTimeoutSetting is host.json's functionTimeout as an app setting
// (https://learn.microsoft.com/azure/azure-functions/functions-host-json#override-hostjson-values).
const functionTimeoutSetting = "AzureFunctionsJobHost__functionTimeout"

// passTimeout is how long one invocation's pass may run (zero: no bound),
// read once from the environment and host.json in the working directory
// (the function app's root, where the host starts the handler).
var passTimeout = sync.OnceValue(func() time.Duration { return passTimeoutFrom(os.Getenv, os.ReadFile) })

// passTimeoutFrom is functionTimeout less passMargin (or half of it, when
// shorter); -1 means no timeout.
func passTimeoutFrom(getenv func(string) string, readFile func(string) ([]byte, error)) time.Duration {
	raw := getenv(functionTimeoutSetting)
	if raw == "" {
		if body, err := readFile("host.json"); err == nil {
			var host struct {
				FunctionTimeout string `json:"functionTimeout"`
			}
			if json.Unmarshal(body, &host) == nil {
				raw = host.FunctionTimeout
			}
		}
	}
	if strings.TrimSpace(raw) == "-1" {
		return 0
	}
	timeout, ok := parseTimeSpan(raw)
	if !ok {
		timeout = defaultFunctionTimeout
	}
	return max(timeout-passMargin, timeout/2)
}

// parseTimeSpan reads a .NET TimeSpan as host.json writes it: [d.]hh:mm:ss.
func parseTimeSpan(raw string) (time.Duration, bool) {
	days := 0
	if dot := strings.Index(raw, "."); dot >= 0 && dot < strings.Index(raw, ":") {
		var err error
		if days, err = strconv.Atoi(raw[:dot]); err != nil {
			return 0, false
		}
		raw = raw[dot+1:]
	}
	parts := strings.Split(strings.TrimSpace(raw), ":")
	if len(parts) != 3 {
		return 0, false
	}
	total := time.Duration(days) * 24 * time.Hour
	for i, unit := range []time.Duration{time.Hour, time.Minute, time.Second} {
		value, err := strconv.Atoi(parts[i])
		if err != nil || value < 0 {
			return 0, false
		}
		total += time.Duration(value) * unit
	}
	return total, total > 0
}
