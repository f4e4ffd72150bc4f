// Package linkguard holds the test that keeps the repository's top-level
// internal/ tree out of what users run. internal/ holds the local stand-ins
// for Azure and the cluster (ARM emulator, local Service Bus, local
// Functions host, control plane, the whole local loop) and test support;
// none of it may link into the deployed handler (./functions), the relay
// (./relay) or the user CLI (./cmd/karpfunc).
//
// Only the module's own top-level internal/ is meant: a binary's or a
// package's private tree (functions/internal/customhandler,
// relay/internal/..., pkg/catalog/internal/...) is production code that
// Go's visibility rule keeps to its parent, and is allowed.
//
// Links between documents (Markdown links to files and headings) are
// hack/repocheck's, which `make lint` runs.
package linkguard
