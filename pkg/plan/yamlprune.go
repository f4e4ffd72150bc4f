package plan

import (
	"bytes"

	"github.com/karpfunc/karpfunc/pkg/plan/internal/yamljson"
)

// A YAML item is converted to JSON already without most of what pruning
// drops (env, probes, mounts, managedFields...): yamlPruner hands a
// pruneRule's key lists to yamljson. It drops only keys the rule never
// copies, spelt so that the JSON key is the same bytes (the rule judges
// JSON's raw keys), and nothing where the rule counts what it left out
// (annotations); readPruned then prunes the rest, so the JSON decoded is
// the same bytes as from converting everything
// (TestYAMLPrunedMatches).
type yamlPruner struct{ rule *pruneRule }

func (p yamlPruner) Drop(key []byte) bool {
	return !p.rule.absentWhenEmptied && plainKey(key) && !p.rule.copies(key)
}

func (p yamlPruner) Mapping(key []byte) yamljson.Pruner {
	return prunerFor(p.rule.objects[string(key)])
}

func (p yamlPruner) Elements(key []byte) yamljson.Pruner {
	sub := p.rule.arrays[string(key)]
	if sub != nil && (sub.withKey != nil || sub.typeIn != nil) {
		return nil // elements are kept or left out whole, by readPruned
	}
	return prunerFor(sub)
}

// prunerFor is rule as a yamljson.Pruner; nil (no pruning) for no rule.
func prunerFor(rule *pruneRule) yamljson.Pruner {
	if rule == nil {
		return nil
	}
	return yamlPruner{rule}
}

// plainKey: letters, digits and "-_./", which JSON writes as they are.
func plainKey(key []byte) bool {
	for _, char := range key {
		if !plainKeyByte[char] {
			return false
		}
	}
	return len(key) > 0
}

var plainKeyByte = func() (table [256]bool) {
	for char := range table {
		table[char] = char >= 'a' && char <= 'z' || char >= 'A' && char <= 'Z' || char >= '0' && char <= '9' ||
			char == '-' || char == '_' || char == '.' || char == '/'
	}
	return table
}()

// yamlPrunerFor is the Pruner for a YAML item whose first two lines are
// its apiVersion and kind, plain (as kubectl prints them, keys sorted);
// nil for any other item.
func yamlPrunerFor(doc []byte) yamljson.Pruner {
	apiVersion, rest, ok := plainLine(doc, "apiVersion: ")
	if !ok {
		return nil
	}
	kind, _, ok := plainLine(rest, "kind: ")
	if !ok {
		return nil
	}
	return prunerFor(pruneRuleFor(apiGroup(apiVersion), kind))
}

// plainLine reads the line `prefix value` at the start of doc, value made
// of plainKey's bytes, and returns value and the lines after it.
func plainLine(doc []byte, prefix string) (string, []byte, bool) {
	rest, ok := bytes.CutPrefix(doc, []byte(prefix))
	if !ok {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '\n')
	if end < 0 || !plainKey(rest[:end]) {
		return "", nil, false
	}
	return string(rest[:end]), rest[end+1:], true
}
