// Package azure launches and manages the Azure virtual machines that back
// Karpenter NodeClaims: one NIC and one VM per NodeClaim, in the cluster's
// node resource group, through the real ARM SDK clients (armcompute,
// armnetwork).
//
// Every call is idempotent so that an at-least-once message can be replayed
// safely: Create does GET before PUT and returns what already exists, Delete
// treats "already gone" as success. Names are deterministic (the NodeClaim
// name), and every resource is tagged with the cluster, NodePool and
// NodeClaim so a garbage-collection sweep can always find what we created.
//
// Errors from ARM are converted into *ARMError, which keeps the ARM error
// code; IsNotFound, IsCapacityError, IsQuotaError and IsThrottled classify
// them the way the provisioning and lifecycle logic needs.
package azure
