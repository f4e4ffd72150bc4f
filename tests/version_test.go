package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/internal/localenv"
)

// TestProcessesLogTheirBuild: the handler and the relay, built with
// `go build` as the loop runs them, each log one structured line at start
// saying which build runs (module, version, commit, commit date, Go
// version), so a bug report's logs name the build.
func TestProcessesLogTheirBuild(t *testing.T) {
	env := startEnv(t, localenv.Options{ClusterName: "version"})
	for _, process := range []struct{ prefix, message string }{
		{"handler: ", "karpfunc handler starting"},
		{"relay | ", "karpfunc relay starting"},
	} {
		eventually(t, time.Minute, process.message, func() (bool, string) {
			data, err := os.ReadFile(env.LogPath)
			if err != nil {
				return false, err.Error()
			}
			found := 0
			for line := range strings.SplitSeq(string(data), "\n") {
				_, record, ok := strings.Cut(line, process.prefix)
				if !ok || !strings.Contains(record, process.message) {
					continue
				}
				found++
				var fields map[string]any
				if err := json.Unmarshal([]byte(record), &fields); err != nil {
					t.Fatalf("start line %q is not a JSON record: %v", record, err)
				}
				for key, want := range map[string]any{"module": "github.com/karpfunc/karpfunc", "goVersion": runtime.Version()} {
					if fields[key] != want {
						t.Errorf("start line %s: %s = %v, want %v", record, key, fields[key], want)
					}
				}
				for _, key := range []string{"version", "commit", "commitDate", "modified"} {
					if _, ok := fields[key]; !ok {
						t.Errorf("start line %s lacks %s", record, key)
					}
				}
			}
			return found > 0, fmt.Sprintf("no %q line from %q in %s yet", process.message, strings.TrimSpace(process.prefix), env.LogPath)
		})
	}
}
