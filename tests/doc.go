// Package tests holds karpfunc's end-to-end tests. They run the whole loop
// through real processes on this machine (see internal/localenv): etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok; the ARM
// emulator serving the real Azure SDK clients; the local Functions host
// starting the real handler binary; and the relay. Nothing is mocked.
//
// Each test starts its own loop, so tests share no state. Tests that spend
// most of their time waiting on the loop (VM boots, tolerations, expiry,
// maintenance windows) call t.Parallel: they run together after the serial
// ones, bounded by go test's -parallel. Tests that set process environment
// (t.Setenv) or count the loop's invocations stay serial.
package tests
