package exclude

import "testing"

func TestReason(t *testing.T) {
	// usable is a size every rule accepts; each row changes what it tests.
	usable := func(name string, change ...func(*Facts)) Facts {
		vcpus, mem, arch := int64(4), 16.0, "x64"
		f := Facts{Name: name, Tier: "Standard", VCPUs: &vcpus, MemoryGiB: &mem, Architecture: &arch}
		for _, c := range change {
			c(&f)
		}
		return f
	}
	vcpus := func(n int64) func(*Facts) { return func(f *Facts) { f.VCPUs = &n } }
	memory := func(g float64) func(*Facts) { return func(f *Facts) { f.MemoryGiB = &g } }
	arch := func(a string) func(*Facts) { return func(f *Facts) { f.Architecture = &a } }
	gpu := func(g GPU) func(*Facts) { return func(f *Facts) { f.GPU = g } }

	for _, tc := range []struct {
		name  string
		facts Facts
		want  string
	}{
		{"general purpose x64", usable("Standard_D4s_v5"), ""},
		{"arm64", usable("Standard_D4ps_v5", arch("Arm64")), ""},
		{"exactly 2 vCPUs and 3.5 GiB", usable("Standard_X2", vcpus(2), memory(3.5)), ""},
		{"supported GPU", usable("Standard_NC24ads_A100_v4", gpu(SupportedGPU)), ""},

		{"Basic tier", usable("Basic_A2", func(f *Facts) { f.Tier = "Basic" }), "basic tier"},
		{"Standard tier but not a Standard_ name", usable("Basic_A2"), "basic tier"},
		{"Basic name in the Standard tier field", usable("Standard_A2", func(f *Facts) { f.Tier = "Basic" }), "basic tier"},
		{"promo", usable("Standard_D2_v2_Promo"), "promo"},
		{"unknown vCPUs", usable("Standard_X4", func(f *Facts) { f.VCPUs = nil }), "unknown vcpus/memory/architecture"},
		{"unknown memory", usable("Standard_X4", func(f *Facts) { f.MemoryGiB = nil }), "unknown vcpus/memory/architecture"},
		{"unknown architecture", usable("Standard_X4", func(f *Facts) { f.Architecture = nil }), "unknown vcpus/memory/architecture"},
		{"1 vCPU", usable("Standard_X1", vcpus(1)), "fewer than 2 vCPUs"},
		{"0 vCPUs (the SKU API left it out)", usable("Standard_X4", vcpus(0)), "fewer than 2 vCPUs"},
		{"3 GiB", usable("Standard_D1_v2", memory(3)), "less than 3.5 GiB"},
		{"just under 3.5 GiB", usable("Standard_X2", memory(3.49)), "less than 3.5 GiB"},
		// The listed sizes are all too small today; these facts are made up
		// to show the list applies on its own.
		{"on the provider's list", usable("Standard_B1ms"), "restricted by AKS"},
		{"A1_v2 on the provider's list", usable("Standard_A1_v2"), "restricted by AKS"},
		{"constrained vCPU M", usable("Standard_M8-2ms"), "constrained vCPU"},
		{"constrained vCPU DS v2", usable("Standard_DS11-1_v2"), "constrained vCPU"},
		{"confidential DC", usable("Standard_DC4as_v5"), "confidential"},
		{"confidential EC", usable("Standard_EC4as_v5"), "confidential"},
		{"unknown CPU architecture", usable("Standard_X4", arch("ia64")), `unknown architecture "ia64"`},
		{"amd64 is not how Azure writes it", usable("Standard_X4", arch("amd64")), `unknown architecture "amd64"`},
		{"unsupported GPU", usable("Standard_NG8ads_V620_v1", gpu(UnsupportedGPU)), "gpu not in the supported list"},
		{"GPU count unknown", usable("Standard_ND96is_MI300X_v5", gpu(GPUCountUnknown)), "gpu count unknown"},
		{"GPU class no caller defines", usable("Standard_X4", gpu(GPU(42))), "gpu not in the supported list"},

		// The first reason wins, so counts by reason do not depend on
		// which other facts are also wrong.
		{"Basic before size", usable("Basic_A0", vcpus(1), memory(0.75), func(f *Facts) { f.Tier = "Basic" }), "basic tier"},
		{"unknown before small", usable("Standard_X1", vcpus(1), func(f *Facts) { f.Architecture = nil }), "unknown vcpus/memory/architecture"},
		{"small before the provider's list", usable("Standard_A0", vcpus(1), memory(0.75)), "fewer than 2 vCPUs"},
		{"confidential before GPU", usable("Standard_DC4as_cc_v5", gpu(UnsupportedGPU)), "confidential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reason(tc.facts); got != tc.want {
				t.Errorf("Reason(%s) = %q, want %q", tc.facts.Name, got, tc.want)
			}
		})
	}
}

func TestKubeArch(t *testing.T) {
	for _, tc := range []struct {
		azure, want string
		ok          bool
	}{
		{"x64", "amd64", true},
		{"Arm64", "arm64", true},
		{"arm64", "", false}, // Azure's spelling is exact
		{"", "", false},
	} {
		if got, ok := KubeArch(tc.azure); got != tc.want || ok != tc.ok {
			t.Errorf("KubeArch(%q) = %q, %v; want %q, %v", tc.azure, got, ok, tc.want, tc.ok)
		}
	}
}
