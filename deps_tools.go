//go:build tools

// Package karpfunc pins dependencies the packages below use, so `go mod tidy`
// keeps them while those packages are being written.
package karpfunc

import (
	_ "github.com/Azure/azure-sdk-for-go/sdk/azcore"
	_ "github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	_ "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	_ "github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azsystemevents"
	_ "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	_ "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	_ "github.com/samber/lo"
	_ "go.opentelemetry.io/otel"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/karpenter/pkg/scheduling"
	_ "sigs.k8s.io/karpenter/pkg/utils/resources"
	_ "github.com/robfig/cron/v3"
)
