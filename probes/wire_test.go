package probes

import (
	"strings"
	"testing"
)

// The parameters round-trip through their one document, and the reader
// refuses anything but exactly that document.
func TestParamsWire(t *testing.T) {
	in := Params{Token: "sc0123", RunID: "r", MetadataAddr: "10.0.0.1:80", Marker: "m", Phase: "plant",
		GoAhead: "sc0123", Pack: &PackBounds{MaxFiles: 1, MaxFileBytes: 2, MaxTotalBytes: 3}}
	doc, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc, `"schema":"`+ParamsSchema+`"`) {
		t.Errorf("document lacks its schema: %s", doc)
	}
	out, err := ParseParams([]byte(doc))
	if err != nil {
		t.Fatalf("own document refused: %v", err)
	}
	if out.Token != in.Token || out.MetadataAddr != in.MetadataAddr || out.Phase != in.Phase || out.GoAhead != in.GoAhead || *out.Pack != *in.Pack {
		t.Errorf("round trip: %+v", out)
	}
	for name, bad := range map[string]string{
		"unknown field": strings.Replace(doc, `"token"`, `"tokenn"`, 1),
		"wrong schema":  strings.Replace(doc, "probe-params/v1", "probe-params/v2", 1),
		"no schema":     `{"token":"x"}`,
		"trailing data": doc + `{}`,
		"not an object": `["x"]`,
		"wrong type":    strings.Replace(doc, `"token":"sc0123"`, `"token":1`, 1),
		"too large":     `{"schema":"` + ParamsSchema + `","token":"` + strings.Repeat("a", MaxParamsBytes) + `"}`,
		"empty":         ``,
		"pack unknown":  strings.Replace(doc, `"max_files"`, `"max_filez"`, 1),
	} {
		if _, err := ParseParams([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
