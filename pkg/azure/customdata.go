package azure

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
)

// ParseCustomData reads back the provisioning environment from customData
// as the node image sees it: base64 of a bash script, whose NAME="value"
// lines set the variables. It is for the ARM emulator and tests; the error
// says what a real node would choke on.
func ParseCustomData(customData string) (map[string]string, error) {
	raw, err := base64.StdEncoding.DecodeString(customData)
	if err != nil {
		return nil, fmt.Errorf("customData is not base64: %w", err)
	}
	script := string(raw)
	if !strings.HasPrefix(script, "#!/bin/bash\n") {
		return nil, fmt.Errorf("customData is not a bash script (no #!/bin/bash line): cloud-init would not run it")
	}
	vars := map[string]string{}
	for i, line := range strings.Split(script, "\n") {
		name, value, ok := strings.Cut(line, "=")
		if !ok || !envNameRE.MatchString(name) {
			continue
		}
		unquoted, err := shellUnquote(value)
		if err != nil {
			return nil, fmt.Errorf("customData line %d (%s): %w", i+1, name, err)
		}
		vars[name] = unquoted
	}
	return vars, nil
}

var envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

func shellUnquote(v string) (string, error) {
	if !strings.HasPrefix(v, `"`) {
		if strings.ContainsAny(v, " \t\"'$`\\") {
			return "", fmt.Errorf("unquoted value %q would be split or expanded by bash", v)
		}
		return v, nil
	}
	if len(v) < 2 || !strings.HasSuffix(v, `"`) {
		return "", fmt.Errorf("unterminated double quote")
	}
	in := v[1 : len(v)-1]
	var out strings.Builder
	for i := 0; i < len(in); i++ {
		switch ch := in[i]; ch {
		case '\\':
			if i+1 < len(in) && strings.IndexByte("\\\"$`", in[i+1]) >= 0 {
				out.WriteByte(in[i+1])
				i++
				continue
			}
			out.WriteByte(ch)
		case '"', '$', '`':
			return "", fmt.Errorf("unescaped %q inside double quotes", ch)
		default:
			out.WriteByte(ch)
		}
	}
	return out.String(), nil
}

// ParseKubeletFlags splits KUBELET_FLAGS into flag name -> value; every
// flag must be --name=value.
func ParseKubeletFlags(s string) (map[string]string, error) {
	flags := map[string]string{}
	for _, field := range strings.Fields(s) {
		name, value, ok := strings.Cut(field, "=")
		if !ok || !strings.HasPrefix(name, "--") || len(name) < 3 {
			return nil, fmt.Errorf("kubelet flag %q is not --name=value", field)
		}
		flags[name] = value
	}
	return flags, nil
}
