package nodeimage

import (
	"errors"
	"testing"
)

func TestSelect(t *testing.T) {
	both, gen1, gen2 := []string{"V1", "V2"}, []string{"V1"}, []string{"V2"}
	for _, tc := range []struct {
		name, family, arch string
		gens               []string
		wantDef            string
		wantNoImage        bool
	}{
		{"default family is Ubuntu 22.04, Gen2 preferred", "", "amd64", both, "2204gen2containerd", false},
		{"Ubuntu is 22.04", "Ubuntu", "amd64", gen2, "2204gen2containerd", false},
		{"Gen1-only size boots the Gen1 image", "Ubuntu2204", "amd64", gen1, "2204containerd", false},
		{"Ubuntu 24.04 Gen1", "Ubuntu2404", "amd64", gen1, "2404containerd", false},
		{"Ubuntu 24.04 arm64", "Ubuntu2404", "arm64", both, "2404gen2arm64containerd", false},
		{"empty arch is amd64", "Ubuntu2404", "", gen2, "2404gen2containerd", false},
		{"AzureLinux Gen1", "AzureLinux", "amd64", gen1, "V2", false},
		{"AzureLinux arm64", "AzureLinux", "arm64", gen2, "V2gen2arm64", false},
		{"arm64 has no Gen1 image", "Ubuntu2204", "arm64", gen1, "", true},
		{"no generation at all", "Ubuntu2204", "amd64", nil, "", true},
		{"unknown architecture", "Ubuntu2204", "s390x", both, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, err := Select(tc.family, tc.arch, tc.gens, "202511.07.0")
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
			if !ok || back.Definition != img.Definition || back.Version != "202511.07.0" || back.Generation != img.Generation {
				t.Fatalf("Parse(%s) = %+v, %v", img.ID(), back, ok)
			}
		})
	}
}

func TestSelectRejectsBadInput(t *testing.T) {
	var unknown *UnknownFamilyError
	if _, err := Select("Windows2022", "amd64", []string{"V2"}, ExampleVersion); !errors.As(err, &unknown) {
		t.Fatalf("unknown family: %v", err)
	}
	for _, v := range []string{"latest", "", "2025.11.07", "202511.07"} {
		if _, err := Select("Ubuntu", "amd64", []string{"V2"}, v); err == nil {
			t.Errorf("version %q accepted", v)
		}
	}
	if _, ok := Parse("/CommunityGalleries/other/images/x/versions/1"); ok {
		t.Error("Parse accepted a foreign gallery")
	}
	img, _ := Select("Ubuntu2204", "amd64", []string{"V1", "V2"}, ExampleVersion)
	if want := "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/" + ExampleVersion; img.ID() != want {
		t.Fatalf("ID = %s, want %s", img.ID(), want)
	}
}
