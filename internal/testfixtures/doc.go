// Package testfixtures is the tests' shared support, as Karpenter's
// pkg/test is its: builders for pods, NodePools, NodeClaims, Nodes and
// catalogs, each from an options struct whose zero fields take a stated
// default, and the one event counter. It is test-only code, so it lives
// under internal/ with the stand-ins: nothing shipped may link it
// (hack/linkguard checks the handler, the relay and the CLI).
package testfixtures
