package policies

import (
	"github.com/sandcheck/sandcheck/probes"
)

// catalogData is the catalog as the policy reads it (data.catalog): the
// criteria in order and, per probe, the facts a record must agree with.
func catalogData(criteria []string, specs []probes.Spec) map[string]any {
	ps := make(map[string]any, len(specs))
	for _, s := range specs {
		expect := make(map[string]any, len(s.Expect))
		for p, o := range s.Expect {
			expect[p] = string(o)
		}
		host := make([]any, len(s.Host))
		for i, h := range s.Host {
			host[i] = h
		}
		ps[s.ID] = map[string]any{
			"category":  s.Category,
			"criterion": s.Criterion,
			"severity":  s.Severity,
			"expect":    expect,
			"host":      host,
		}
	}
	cs := make([]any, len(criteria))
	for i, c := range criteria {
		cs[i] = c
	}
	return map[string]any{"criteria": cs, "probes": ps}
}
