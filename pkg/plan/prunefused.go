package plan

import "bytes"

// Pruning an object as it is read: the indented JSON kubectl prints is
// compacted and pruned in one pass (readPruned), instead of being
// compacted whole (appendCompact), walked for its type (quickTypeMeta) and
// walked again, one nesting level at a time, by prune. The fields pruning
// drops (managedFields above all, most of an API-server pod's bytes) are
// crossed once, without being copied.
//
// Invariant: when readPruned answers, its bytes are
// prune(appendCompact(js), rule) (TestReadPrunedMatches, FuzzReadPruned).
// It gives up on anything it does not read plainly (the rule is not known
// from the leading apiVersion and kind, the JSON is not well formed), and
// the caller then takes the separate passes, which keep their errors.

// fusedPruner holds the output of one object being pruned.
type fusedPruner struct {
	src []byte
	dst []byte
}

// readPruned appends js, compacted and pruned by the rule for its leading
// apiVersion and kind, to dst; ok false when it cannot (see above).
func readPruned(dst, js []byte) ([]byte, *pruneRule, bool) {
	rule, ok := leadingRule(js)
	if !ok {
		return dst, nil, false
	}
	p := fusedPruner{src: js, dst: dst}
	end, _, ok := p.object(skipSpace(js, 0), rule)
	if !ok || skipSpace(js, end) != len(js) {
		return dst, nil, false
	}
	return p.dst, rule, true
}

// leadingRule is the prune rule for an object whose first fields are its
// apiVersion and kind, plain strings (as the API server, kubectl and
// yamljson write them).
func leadingRule(js []byte) (*pruneRule, bool) {
	var apiVersion, kind string
	i := skipSpace(js, 0)
	if i >= len(js) || js[i] != '{' {
		return nil, false
	}
	for range 2 {
		key, val, next, ok := plainField(js, skipSpace(js, i+1))
		if !ok {
			return nil, false
		}
		switch key {
		case "apiVersion":
			apiVersion = val
		case "kind":
			kind = val
		}
		i = skipSpace(js, next)
		if i >= len(js) || js[i] != ',' {
			return nil, false
		}
	}
	if apiVersion == "" || kind == "" {
		return nil, false
	}
	return pruneRuleFor(apiGroup(apiVersion), kind), true
}

// plainField reads `"key": "value"` at i, both plain strings; next is
// after the value.
func plainField(js []byte, i int) (key, val string, next int, ok bool) {
	keyEnd, ok := stringAt(js, i)
	if !ok {
		return "", "", 0, false
	}
	colon := skipSpace(js, keyEnd)
	if colon >= len(js) || js[colon] != ':' {
		return "", "", 0, false
	}
	valStart := skipSpace(js, colon+1)
	valEnd, ok := stringAt(js, valStart)
	if !ok {
		return "", "", 0, false
	}
	key, keyOK := plainString(js[i:keyEnd])
	val, valOK := plainString(js[valStart:valEnd])
	return key, val, valEnd, keyOK && valOK
}

// stringAt is the index after the string that opens at i.
func stringAt(js []byte, i int) (int, bool) {
	if i >= len(js) || js[i] != '"' {
		return 0, false
	}
	end := stringEnd(js, i, i+1)
	return end + 1, end >= 0
}

// skipSpace is the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(js []byte, i int) int {
	for i < len(js) && isSpace(js[i]) {
		i = skipSpaces(js, i+1)
	}
	return i
}

func isSpace(char byte) bool {
	return char == ' ' || char == '\n' || char == '\t' || char == '\r'
}

// object copies the object at i pruned by rule, as
// pruneRule.appendObject does with its compact form; it returns the index
// after it and how many of its fields were left out.
func (p *fusedPruner) object(i int, rule *pruneRule) (int, int, bool) {
	p.dst = append(p.dst, '{')
	i = skipSpace(p.src, i+1)
	if i < len(p.src) && p.src[i] == '}' {
		p.dst = append(p.dst, '}')
		return i + 1, 0, true
	}
	left, written := 0, 0
	for {
		next, copied, ok := p.field(i, rule, written)
		if !ok {
			return 0, 0, false
		}
		if copied {
			written++
		} else {
			left++
		}
		i = skipSpace(p.src, next)
		if i >= len(p.src) {
			return 0, 0, false
		}
		switch p.src[i] {
		case ',':
			i = skipSpace(p.src, i+1)
		case '}':
			p.dst = append(p.dst, '}')
			return i + 1, left, true
		default:
			return 0, 0, false
		}
	}
}

// field copies the field at i unless rule leaves it out; copied says
// whether it did.
func (p *fusedPruner) field(i int, rule *pruneRule, written int) (int, bool, bool) {
	keyEnd, ok := stringAt(p.src, i)
	if !ok {
		return 0, false, false
	}
	key := p.src[i+1 : keyEnd-1]
	colon := skipSpace(p.src, keyEnd)
	if colon >= len(p.src) || p.src[colon] != ':' {
		return 0, false, false
	}
	val := skipSpace(p.src, colon+1)
	if !rule.copies(key) {
		end, ok := valueEnd(p.src, val)
		return end, false, ok
	}
	fieldStart := len(p.dst)
	if written > 0 {
		p.dst = append(p.dst, ',')
	}
	p.dst = append(p.dst, '"')
	p.dst = append(p.dst, key...)
	p.dst = append(p.dst, '"', ':')
	end, emptied, ok := p.fieldValue(val, rule, string(key))
	if emptied {
		p.dst = p.dst[:fieldStart]
	}
	return end, !emptied, ok
}

// fieldValue copies the value at i of the field key, pruned by rule's
// rule for it, as pruneRule.appendField does.
func (p *fusedPruner) fieldValue(i int, rule *pruneRule, key string) (int, bool, bool) {
	if i >= len(p.src) {
		return 0, false, false
	}
	if sub := rule.objects[key]; sub != nil && p.src[i] == '{' {
		end, left, ok := p.object(i, sub)
		emptied := sub.absentWhenEmptied && left > 0 && bytes.HasSuffix(p.dst, []byte("{}"))
		return end, emptied, ok
	}
	if sub := rule.arrays[key]; sub != nil && p.src[i] == '[' {
		end, ok := p.elements(i, sub)
		return end, false, ok
	}
	end, ok := p.copyValue(i)
	return end, false, ok
}

// elements copies the array at i with its object elements pruned by rule
// (or left out), as pruneRule.appendElements does.
func (p *fusedPruner) elements(i int, rule *pruneRule) (int, bool) {
	p.dst = append(p.dst, '[')
	i = skipSpace(p.src, i+1)
	if i < len(p.src) && p.src[i] == ']' {
		p.dst = append(p.dst, ']')
		return i + 1, true
	}
	written := 0
	for {
		next, copied, ok := p.element(i, rule, written)
		if !ok {
			return 0, false
		}
		if copied {
			written++
		}
		i = skipSpace(p.src, next)
		if i >= len(p.src) {
			return 0, false
		}
		switch p.src[i] {
		case ',':
			i = skipSpace(p.src, i+1)
		case ']':
			p.dst = append(p.dst, ']')
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// element copies one array element at i; copied false when rule's
// filters leave it out.
func (p *fusedPruner) element(i int, rule *pruneRule, written int) (int, bool, bool) {
	start := len(p.dst)
	if written > 0 {
		p.dst = append(p.dst, ',')
	}
	isObject := i < len(p.src) && p.src[i] == '{'
	switch {
	case isObject && (rule.withKey != nil || rule.typeIn != nil):
		elemStart := len(p.dst)
		end, ok := p.copyValue(i)
		if !rule.keepsElement(p.dst[elemStart:]) {
			p.dst = p.dst[:start]
			return end, false, ok
		}
		return end, true, ok
	case isObject:
		end, _, ok := p.object(i, rule)
		return end, true, ok
	}
	end, ok := p.copyValue(i)
	return end, true, ok
}

// keepsElement applies the rule's element filters (withKey, typeIn) to
// the compact JSON object elem, as pruneRule.appendElements does.
func (r *pruneRule) keepsElement(elem []byte) bool {
	return (r.withKey == nil || hasField(elem, r.withKey)) && (r.typeIn == nil || typeAmong(elem, r.typeIn))
}

// copyValue copies the value at i compacted; it returns the index after
// it.
func (p *fusedPruner) copyValue(i int) (int, bool) {
	end, ok := valueEnd(p.src, i)
	if ok {
		p.dst = appendCompact(p.dst, p.src[i:end])
	}
	return end, ok
}

// valueEnd is the index after the value at i: where its brackets balance
// outside strings, as skip finds it in compact JSON; a scalar ends at
// white space or a delimiter.
func valueEnd(js []byte, i int) (int, bool) {
	if i >= len(js) {
		return 0, false
	}
	switch js[i] {
	case '"':
		return stringAt(js, i)
	case '{', '[':
		var state scanState
		end, done := state.run(js, i, i)
		return end, done
	}
	end := i
	for end < len(js) && !isDelimiter(js[end]) {
		end++
	}
	return end, end > i
}
