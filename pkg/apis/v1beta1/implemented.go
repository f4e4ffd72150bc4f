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
	"spec.gpu.mode",
}

// Refused lists the paths of the settings the CRD's CEL rules refuse, for
// objects that never went through the API server (plan input files). It
// answers as the rules on AKSNodeClassSpec do.
func (in *AKSNodeClassSpec) Refused() []string {
	var out []string
	for _, r := range refusals {
		if r.refused(in) {
			out = append(out, r.path)
		}
	}
	return out
}

// refusals mirror the CEL rules on AKSNodeClassSpec, one per refused path.
var refusals = []struct {
	path    string
	refused func(*AKSNodeClassSpec) bool
}{
	{"spec.fipsMode", func(s *AKSNodeClassSpec) bool { return s.FIPSMode != nil && *s.FIPSMode == FIPSModeFIPS }},
	{"spec.security.trustedLaunch", func(s *AKSNodeClassSpec) bool {
		if s.Security == nil || s.Security.TrustedLaunch == nil {
			return false
		}
		return isTrue(s.Security.TrustedLaunch.VTPM) || isTrue(s.Security.TrustedLaunch.SecureBoot)
	}},
	{"spec.localDNS", func(s *AKSNodeClassSpec) bool { return s.LocalDNS != nil }},
	{"spec.artifactStreaming", func(s *AKSNodeClassSpec) bool {
		return s.ArtifactStreaming != nil && isTrue(s.ArtifactStreaming.Enabled)
	}},
	{"spec.linuxOSConfig.swapFileSize", func(s *AKSNodeClassSpec) bool {
		return s.LinuxOSConfig != nil && s.LinuxOSConfig.SwapFileSize != nil
	}},
	{"spec.linuxOSConfig.transparentHugePageEnabled", func(s *AKSNodeClassSpec) bool {
		return s.LinuxOSConfig != nil && s.LinuxOSConfig.TransparentHugePageEnabled != nil
	}},
	{"spec.linuxOSConfig.transparentHugePageDefrag", func(s *AKSNodeClassSpec) bool {
		return s.LinuxOSConfig != nil && s.LinuxOSConfig.TransparentHugePageDefrag != nil
	}},
	{"spec.kubelet.failSwapOn", func(s *AKSNodeClassSpec) bool {
		return s.Kubelet != nil && s.Kubelet.FailSwapOn != nil && !*s.Kubelet.FailSwapOn
	}},
}

func isTrue(b *bool) bool { return b != nil && *b }
