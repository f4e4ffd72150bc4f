package plan

import (
	"encoding/json"
	"reflect"
	"testing"
)

var typeMetaCases = []string{
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"b"},"spec":{"x":[1,{"y":"}"}]}}`,
	`{"kind":"Pod"}`, `{}`, `{"kind":null,"metadata":null}`, `{"Kind":"Pod"}`, `{"KIND":"Pod","kind":"Node"}`,
	`{"kind":"P\"od"}`, `{"kind":1}`, `{"kind":"Pod","items":[]}`, `{"metadata":{"Name":"x"}}`,
	`{"metadata":{"name":"x","labels":{"name":"y"}}}`, `{"metadata":"x"}`, `{"metadata":[]}`, `[]`, `"x"`, `null`,
	`{"\u212aind":"Pod"}`, "{\"\u212aind\":\"Pod\"}", `{"a":"\\","kind":"Pod"}`, `{"a":{"b":"]"},"kind":"Pod"}`,
	`{"kind":"Pod","metadata":{"namespace":"n","name":"a"}}`, `{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod"}]}`,
	`{"kind":"Pod",}`, `{"kind":}`, `{"kind":"Pod"`, `{"kind" :"Pod"}`, `{"a":[[]],"kind":"x"}`, `{"metadata":{}}`,
}

// TestQuickTypeMeta: whenever the quick reader answers, encoding/json
// reads the same without error.
func TestQuickTypeMeta(t *testing.T) {
	answered := 0
	for _, js := range typeMetaCases {
		quick, ok := quickTypeMeta([]byte(js))
		if !ok {
			continue
		}
		answered++
		var want typeMeta
		if err := json.Unmarshal([]byte(js), &want); err != nil {
			t.Errorf("%s: quick answered %+v, encoding/json fails: %v", js, quick, err)
			continue
		}
		if !reflect.DeepEqual(quick, want) {
			t.Errorf("%s: quick %+v, encoding/json %+v", js, quick, want)
		}
	}
	if answered < 8 {
		t.Errorf("the quick reader answered only %d cases", answered)
	}
}

func FuzzQuickTypeMeta(f *testing.F) {
	for _, js := range typeMetaCases {
		f.Add([]byte(js))
	}
	f.Fuzz(func(t *testing.T, js []byte) {
		quick, ok := quickTypeMeta(js)
		if !ok {
			return
		}
		var want typeMeta
		if err := json.Unmarshal(js, &want); err != nil {
			if json.Valid(js) {
				t.Fatalf("%s: quick answered %+v, encoding/json fails: %v", js, quick, err)
			}
			return // quickTypeMeta trusts its input to be JSON
		}
		if !reflect.DeepEqual(quick, want) {
			t.Fatalf("%s: quick %+v, encoding/json %+v", js, quick, want)
		}
	})
}
