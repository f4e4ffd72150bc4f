package tests

import (
	"fmt"
	"net/http"
	"regexp"
)

// handlerErrorRE is a failure's reason as the handler writes it to stderr
// (its Logger prefixes lines with "[<Function> <invocation id>] ", and the
// last line of a failure is "error: <reason>"): the only place the reason
// reaches, since the host drops a non-2xx answer's Logs, as the real host
// does (azure-functions-host DefaultHttpWorkerService.cs).
var handlerErrorRE = regexp.MustCompile(`\[(\w+) ([0-9a-f-]{36})\] error: ([^\n]*)`)

// failedWithReason reports whether the process log shows an invocation of
// a function that failed with status and whose handler stderr gives a
// reason matching reason: the handler's error line and the host's
// "Executed … (Failed, Id=<same id>…): Response status code does not
// indicate success: <status> …" line.
func failedWithReason(logData []byte, status int, reason *regexp.Regexp) bool {
	for _, m := range handlerErrorRE.FindAllSubmatch(logData, -1) {
		if !reason.Match(m[3]) {
			continue
		}
		host := fmt.Sprintf(`Executed 'Functions\.%s' \(Failed, Id=%s, [^)]*\): Response status code does not indicate success: %d \(%s\)\.`,
			m[1], m[2], status, regexp.QuoteMeta(http.StatusText(status)))
		if regexp.MustCompile(host).Match(logData) {
			return true
		}
	}
	return false
}
