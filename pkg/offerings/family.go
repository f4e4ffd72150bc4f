package offerings

import (
	"strings"
	"unicode"
)

// QuotaFamily is the Azure quota family of a VM size, the name quota errors
// and the Usage API use: Standard_D4s_v5 -> standardDSv5Family,
// Standard_D8as_v5 -> standardDASv5Family, Standard_E4_v3 ->
// standardEv3Family. It returns "" for a name it cannot read.
func QuotaFamily(size string) string {
	parts := strings.Split(strings.TrimPrefix(size, "Standard_"), "_")
	if len(parts) == 0 || parts[0] == "" {
		return ""
	}
	base := parts[0]
	i := 0
	for i < len(base) && unicode.IsLetter(rune(base[i])) {
		i++
	}
	j := i
	for j < len(base) && (unicode.IsDigit(rune(base[j])) || base[j] == '-') {
		j++
	}
	if i == 0 || j == i {
		return ""
	}
	fam := base[:i] + strings.ToUpper(base[j:])
	version := ""
	for _, p := range parts[1:] {
		if strings.HasPrefix(strings.ToLower(p), "v") {
			version = strings.ToLower(p)
		}
	}
	return "standard" + strings.ToUpper(fam[:1]) + fam[1:] + version + "Family"
}
