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
	lettersEnd := 0
	for lettersEnd < len(base) && unicode.IsLetter(rune(base[lettersEnd])) {
		lettersEnd++
	}
	digitsEnd := lettersEnd
	for digitsEnd < len(base) && (unicode.IsDigit(rune(base[digitsEnd])) || base[digitsEnd] == '-') {
		digitsEnd++
	}
	if lettersEnd == 0 || digitsEnd == lettersEnd {
		return ""
	}
	fam := base[:lettersEnd] + strings.ToUpper(base[digitsEnd:])
	version := ""
	for _, part := range parts[1:] {
		if strings.HasPrefix(strings.ToLower(part), "v") {
			version = strings.ToLower(part)
		}
	}
	return "standard" + strings.ToUpper(fam[:1]) + fam[1:] + version + "Family"
}
