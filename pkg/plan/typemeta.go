package plan

import "bytes"

// quickTypeMeta reads what json.Unmarshal(js, &typeMeta{}) would, without
// reflection, from the compact JSON that encoding/json and yamljson write
// (every document is in that form before it is decoded). It gives up
// (ok false) on anything else, on Lists, on values of the wrong type and
// on keys encoding/json would match case-insensitively, so that the caller
// decodes with encoding/json and keeps its errors.
func quickTypeMeta(js []byte) (tm typeMeta, ok bool) {
	ok = objectFields(js, func(key, val []byte) bool {
		switch string(key) {
		case "apiVersion":
			tm.APIVersion, ok = plainString(val)
			return ok
		case "kind":
			tm.Kind, ok = plainString(val)
			return ok
		case "metadata":
			if string(val) == "null" {
				return true
			}
			return objectFields(val, func(key, val []byte) bool {
				switch string(key) {
				case "name":
					tm.Metadata.Name, ok = plainString(val)
					return ok
				case "namespace":
					tm.Metadata.Namespace, ok = plainString(val)
					return ok
				}
				return !folds(key, "name", "namespace")
			})
		}
		return !folds(key, "apiversion", "kind", "metadata", "items")
	})
	return tm, ok
}

// folds reports whether key may match one of the lower-case names the way
// encoding/json matches field names; non-ASCII or escaped keys may.
func folds(key []byte, names ...string) bool {
	for _, b := range key {
		if b >= 0x80 || b == '\\' {
			return true
		}
	}
	for _, n := range names {
		if len(n) == len(key) && bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// plainString is a JSON string of printable ASCII without escapes, or
// null ("").
func plainString(val []byte) (string, bool) {
	if string(val) == "null" {
		return "", true
	}
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return "", false
	}
	for _, b := range val[1 : len(val)-1] {
		if b < 0x20 || b > 0x7e || b == '\\' || b == '"' {
			return "", false
		}
	}
	return string(val[1 : len(val)-1]), true
}

// objectFields calls f with each key (raw, without quotes) and value of
// the compact JSON object js, stopping when f says so; false when js is
// not such an object or f stopped.
func objectFields(js []byte, f func(key, val []byte) bool) bool {
	if len(js) < 2 || js[0] != '{' || js[len(js)-1] != '}' {
		return false
	}
	i := 1
	if js[i] == '}' {
		return i == len(js)-1
	}
	for {
		if js[i] != '"' {
			return false
		}
		end := skip(js, i)
		if end < 0 || end >= len(js) || js[end] != ':' {
			return false
		}
		key := js[i+1 : end-1]
		vend := skip(js, end+1)
		if vend <= end+1 || vend >= len(js) {
			return false
		}
		if !f(key, js[end+1:vend]) {
			return false
		}
		switch js[vend] {
		case ',':
			i = vend + 1
		case '}':
			return vend == len(js)-1
		default:
			return false
		}
	}
}

// closingQuote returns the index of the quote that ends the string whose
// text starts at i (after its opening quote), or -1.
func closingQuote(js []byte, i int) int {
	if i > len(js) {
		return -1
	}
	return stringEnd(js, i-1, i)
}

// skip returns the index just after the compact JSON value at i, or -1.
func skip(js []byte, i int) int {
	if i >= len(js) {
		return -1
	}
	depth := 0
	for ; i < len(js); i++ {
		switch js[i] {
		case '"':
			if i = closingQuote(js, i+1); i < 0 {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',', ':':
			if depth == 0 {
				return i
			}
		}
		if depth == 0 && (js[i] == '"' || js[i] == '}' || js[i] == ']') {
			return i + 1
		}
	}
	if depth == 0 {
		return i
	}
	return -1
}
