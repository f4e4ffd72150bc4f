// Package tests holds karpfunc's end-to-end tests. They run the whole loop
// through real processes on this machine (see internal/localenv): etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok; the ARM
// emulator serving the real Azure SDK clients; the local Functions host
// starting the real handler binary; and the relay. Nothing is mocked.
package tests
