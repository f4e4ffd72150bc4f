package nodeimage

import (
	"errors"
	"strings"
	"testing"
)

func TestSelect(t *testing.T) {
	both, gen1, gen2 := []string{"V1", "V2"}, []string{"V1"}, []string{"V2"}
	for _, tc := range []struct {
		name, family, arch, kube string
		gens                     []string
		wantDef                  string
		wantNoImage              bool
	}{
		{"default family at 1.33 is Ubuntu 22.04, Gen2 preferred", "", "amd64", "1.33.2", both, "2204gen2containerd", false},
		{"default family at 1.34 is Ubuntu 24.04", "", "amd64", "1.34.0", both, "2404gen2containerd", false},
		{"Ubuntu at 1.33 is 22.04", "Ubuntu", "amd64", "1.33.2", gen2, "2204gen2containerd", false},
		{"Ubuntu at 1.37 is 24.04", "Ubuntu", "amd64", "v1.37.2", gen2, "2404gen2containerd", false},
		{"Ubuntu arm64 at 1.37", "Ubuntu", "arm64", "1.37.2", gen2, "2404gen2arm64containerd", false},
		{"Gen1-only size boots the Gen1 image", "Ubuntu2204", "amd64", "1.33.2", gen1, "2204containerd", false},
		{"Ubuntu 24.04 Gen1", "Ubuntu2404", "amd64", "1.33.2", gen1, "2404containerd", false},
		{"Ubuntu 24.04 arm64", "Ubuntu2404", "arm64", "1.35.0", both, "2404gen2arm64containerd", false},
		{"empty arch is amd64", "Ubuntu2404", "", "1.35.0", gen2, "2404gen2containerd", false},
		{"AzureLinux at 1.32 is Azure Linux 3, Gen1", "AzureLinux", "amd64", "1.32.0", gen1, "V3", false},
		{"AzureLinux arm64 at 1.36", "AzureLinux", "arm64", "1.36.1", gen2, "V3gen2arm64", false},
		{"arm64 has no Gen1 image", "Ubuntu2204", "arm64", "1.33.2", gen1, "", true},
		{"no generation at all", "Ubuntu2204", "amd64", "1.33.2", nil, "", true},
		{"unknown architecture", "Ubuntu2204", "s390x", "1.33.2", both, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, err := Select(Want{Family: tc.family, Architecture: tc.arch, Generations: tc.gens, KubernetesVersion: tc.kube}, "202511.07.0")
			var noImage *NoImageError
			if tc.wantNoImage {
				if !errors.As(err, &noImage) {
					t.Fatalf("Select = %+v, %v; want a NoImageError", img, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if img.Definition != tc.wantDef {
				t.Fatalf("definition = %s, want %s", img.Definition, tc.wantDef)
			}
			back, ok := Parse(img.ID())
			if !ok || back.Definition != img.Definition || back.Version != "202511.07.0" || back.Generation != img.Generation || back.OS != img.OS {
				t.Fatalf("Parse(%s) = %+v, %v", img.ID(), back, ok)
			}
		})
	}
}

// A family AKS does not offer at the Kubernetes version gets an
// *UnsupportedVersionError naming the supported range (Learn's table).
func TestUnsupportedVersions(t *testing.T) {
	for _, tc := range []struct {
		family, kube, wantOS, wantText string
	}{
		{"Ubuntu2204", "1.37.2", OSUbuntu2204, "1.25 to 1.33"},
		{"Ubuntu2204", "1.34.0", OSUbuntu2204, "1.25 to 1.33"},
		{"Ubuntu2404", "1.31.5", OSUbuntu2404, "1.32 to 1.38"},
		{"Ubuntu2404", "1.39.0", OSUbuntu2404, "1.32 to 1.38"},
		{"AzureLinux", "1.37.2", OSAzureLinux3, "1.28 to 1.36"},
		{"AzureLinux", "1.31.4", OSAzureLinux2, "removed from AKS on 2026-03-31"},
	} {
		t.Run(tc.family+"@"+tc.kube, func(t *testing.T) {
			_, err := Definition(Want{Family: tc.family, Architecture: "amd64", Generations: []string{"V2"}, KubernetesVersion: tc.kube})
			var unsupported *UnsupportedVersionError
			if !errors.As(err, &unsupported) || unsupported.OS != tc.wantOS || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("Definition = %v; want an UnsupportedVersionError for %s saying %q", err, tc.wantOS, tc.wantText)
			}
		})
	}
}

// The provider's family rules, FIPS and Trusted Launch included
// (resolver.go:251-284).
func TestOSFor(t *testing.T) {
	for _, tc := range []struct {
		family, kube string
		fips, tl     bool
		want         string
	}{
		{"", "1.33.9", false, false, OSUbuntu2204},
		{"Ubuntu", "1.34.0", false, false, OSUbuntu2404},
		{"Ubuntu", "1.37.2", false, true, OSUbuntu2204},
		{"Ubuntu", "1.37.2", true, false, OSUbuntu2004},
		{"Ubuntu", "1.37.2", true, true, OSUbuntu2204},
		{"Ubuntu2204", "1.37.2", false, false, OSUbuntu2204},
		{"Ubuntu2404", "1.30.0", false, false, OSUbuntu2404},
		{"AzureLinux", "1.31.9", false, false, OSAzureLinux2},
		{"AzureLinux", "1.32.0", false, false, OSAzureLinux3},
	} {
		got, err := OSFor(tc.family, tc.kube, tc.fips, tc.tl)
		if err != nil || got != tc.want {
			t.Errorf("OSFor(%q, %s, fips=%v, tl=%v) = %s, %v; want %s", tc.family, tc.kube, tc.fips, tc.tl, got, err, tc.want)
		}
	}
	if _, err := OSFor("Ubuntu", "", false, false); err == nil {
		t.Error("OSFor without a Kubernetes version gave no error")
	}
	if _, err := OSFor("Ubuntu", "latest", false, false); err == nil {
		t.Error("OSFor with a malformed Kubernetes version gave no error")
	}
	var feature *UnsupportedFeatureError
	if _, err := Definition(Want{Family: "Ubuntu", Generations: []string{"V2"}, KubernetesVersion: "1.33.0", FIPS: true}); !errors.As(err, &feature) {
		t.Errorf("FIPS: %v, want an UnsupportedFeatureError", err)
	}
}

func TestSelectRejectsBadInput(t *testing.T) {
	var unknown *UnknownFamilyError
	want := Want{Family: "Windows2022", Architecture: "amd64", Generations: []string{"V2"}, KubernetesVersion: "1.33.2"}
	if _, err := Select(want, ExampleVersion); !errors.As(err, &unknown) {
		t.Fatalf("unknown family: %v", err)
	}
	for _, v := range []string{"latest", "", "2025.11.07", "202511.07"} {
		if _, err := Select(Want{Family: "Ubuntu", Architecture: "amd64", Generations: []string{"V2"}, KubernetesVersion: "1.33.2"}, v); err == nil {
			t.Errorf("version %q accepted", v)
		}
	}
	if _, ok := Parse("/CommunityGalleries/other/images/x/versions/1"); ok {
		t.Error("Parse accepted a foreign gallery")
	}
	img, _ := Select(Want{Family: "Ubuntu2204", Architecture: "amd64", Generations: []string{"V1", "V2"}, KubernetesVersion: "1.33.2"}, ExampleVersion)
	if want := "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/" + ExampleVersion; img.ID() != want {
		t.Fatalf("ID = %s, want %s", img.ID(), want)
	}
}
