package v1beta1

// ImplementedFields are the AKSNodeClass spec fields karpfunc acts on, as
// CRD field paths (an entry covers the fields under it). Every other field
// of the Azure provider's schema is refused by a CEL rule whose message
// starts with its path; package apis' schema test checks that the two lists
// together cover the provider's schema.
var ImplementedFields = []string{
	"spec.vnetSubnetID",
	"spec.osDiskSizeGB",
	"spec.imageFamily",
	"spec.maxPods",

	"spec.tags",
	"spec.kubelet.allowedUnsafeSysctls",
	"spec.kubelet.containerLogMaxFiles",
	"spec.kubelet.containerLogMaxSize",
	"spec.kubelet.cpuCFSQuota",
	"spec.kubelet.cpuCFSQuotaPeriod",
	"spec.kubelet.cpuManagerPolicy",
	"spec.kubelet.imageGCHighThresholdPercent",
	"spec.kubelet.imageGCLowThresholdPercent",
	"spec.kubelet.podPidsLimit",
	"spec.kubelet.topologyManagerPolicy",
	"spec.security.encryptionAtHost",
	"spec.linuxOSConfig.sysctls",
}

// Refused lists the paths of the settings the CRD's CEL rules refuse, for
// objects that never went through the API server (plan input files). It
// answers as the rules on AKSNodeClassSpec do.
func (in *AKSNodeClassSpec) Refused() []string {
	var out []string
	isTrue := func(b *bool) bool { return b != nil && *b }
	if in.FIPSMode != nil && *in.FIPSMode == FIPSModeFIPS {
		out = append(out, "spec.fipsMode")
	}
	if s := in.Security; s != nil {
		if tl := s.TrustedLaunch; tl != nil && (isTrue(tl.VTPM) || isTrue(tl.SecureBoot)) {
			out = append(out, "spec.security.trustedLaunch")
		}
	}
	if in.LocalDNS != nil {
		out = append(out, "spec.localDNS")
	}
	if in.ArtifactStreaming != nil && isTrue(in.ArtifactStreaming.Enabled) {
		out = append(out, "spec.artifactStreaming")
	}
	if in.GPU != nil && in.GPU.Mode != nil && *in.GPU.Mode == GPUModeDriver {
		out = append(out, "spec.gpu.mode")
	}
	if l := in.LinuxOSConfig; l != nil {
		if l.SwapFileSize != nil {
			out = append(out, "spec.linuxOSConfig.swapFileSize")
		}
		if l.TransparentHugePageEnabled != nil {
			out = append(out, "spec.linuxOSConfig.transparentHugePageEnabled")
		}
		if l.TransparentHugePageDefrag != nil {
			out = append(out, "spec.linuxOSConfig.transparentHugePageDefrag")
		}
	}
	if in.Kubelet != nil && in.Kubelet.FailSwapOn != nil && !*in.Kubelet.FailSwapOn {
		out = append(out, "spec.kubelet.failSwapOn")
	}
	return out
}
