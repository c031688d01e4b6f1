package policies

import (
	"strings"
	"testing"
	"time"
)

// TestWaiversCannotEmptyTheGate: a criterion waiver, a glob over a whole
// criterion or several, an expiry past the maximum age (9999-12-31) or in
// the past (before 1678, or yesterday) all loaded before; now each is
// refused at load, naming the line.
func TestWaiversCannotEmptyTheGate(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC) }
	doc := func(field, val, expires string) []byte {
		return []byte("schema: sandcheck.dev/waivers/v1\nwaivers:\n  - " + field + ": \"" + val + "\"\n    target: t\n    owner: o\n    reason: r\n    expires: " + expires + "\n")
	}
	for _, tc := range []struct {
		name, field, val, expires, says string
		opts                            []WaiverOption
	}{
		{"criterion", "criterion", "hardened-runtime", "2027-01-01", "whole criterion hardened-runtime", nil},
		{"glob over criteria", "probe", "*.*", "2027-01-01", "matches probes of 11 criteria", nil},
		{"far future", "probe", "syscalls.bpf", "9999-12-31", "more than 90 days ahead", nil},
		{"before 1678", "probe", "syscalls.bpf", "1677-01-01", "already past", nil},
		{"yesterday", "probe", "syscalls.bpf", "2026-12-01", "already past", nil},
		{"past a shorter maximum", "probe", "syscalls.bpf", "2027-01-01", "more than 7 days ahead", []WaiverOption{WaiverMaxAge(7 * 24 * time.Hour)}},
	} {
		_, err := ParseWaivers("w.yaml", doc(tc.field, tc.val, tc.expires), append([]WaiverOption{WaiverClock(now)}, tc.opts...)...)
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "w.yaml:") {
			t.Errorf("%s: got %v, want a refusal saying %q", tc.name, err, tc.says)
		}
	}
	for _, tc := range []struct {
		name, field, val string
		opts             []WaiverOption
	}{
		{"one probe", "probe", "syscalls.bpf", nil},
		{"part of a criterion", "probe", "metadata.*", nil},
		{"criterion, allowed", "criterion", "hardened-runtime", []WaiverOption{AllowCriterionWaivers(true)}},
	} {
		if _, err := ParseWaivers("w.yaml", doc(tc.field, tc.val, "2027-01-01"), append([]WaiverOption{WaiverClock(now)}, tc.opts...)...); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestWaiverSetsCannotEmptyTheGate: waivers are judged together. Two
// partial globs (teardown.[a-m]* and teardown.[n-z]*) or a waiver per probe
// of a criterion each loaded alone as "part of a criterion", so together
// they emptied verified-teardown without --allow-criterion-waivers; now
// the set is refused at load naming the waivers, unless the flag admits it.
// Waivers of other targets do not add up, and a set that leaves a probe of
// the criterion out still loads.
func TestWaiverSetsCannotEmptyTheGate(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC) }
	doc := func(ws ...[2]string) []byte {
		s := "schema: sandcheck.dev/waivers/v1\nwaivers:\n"
		for _, w := range ws {
			s += "  - probe: \"" + w[0] + "\"\n    target: " + w[1] + "\n    owner: o\n    reason: r\n    expires: 2027-01-01\n"
		}
		return []byte(s)
	}
	refused := map[string][]byte{
		"two partial globs": doc([2]string{"teardown.[a-m]*", "t"}, [2]string{"teardown.[n-z]*", "t"}),
		"one per probe": doc([2]string{"teardown.scratch", "t"}, [2]string{"teardown.process", "t"}, [2]string{"teardown.container", "t"},
			[2]string{"teardown.mounts", "t"}, [2]string{"teardown.network", "t"}),
	}
	for name, b := range refused {
		_, err := ParseWaivers("w.yaml", b, WaiverClock(now))
		if err == nil || !strings.Contains(err.Error(), "together match every probe of criterion verified-teardown") ||
			!strings.Contains(err.Error(), "w.yaml:3") || !strings.Contains(err.Error(), "--allow-criterion-waivers") {
			t.Errorf("%s: got %v, want the set refused as a whole-criterion waiver, naming its waivers", name, err)
		}
		if _, err := ParseWaivers("w.yaml", b, WaiverClock(now), AllowCriterionWaivers(true)); err != nil {
			t.Errorf("%s, allowed: %v", name, err)
		}
	}
	admitted := map[string][]byte{
		"a probe left out": doc([2]string{"teardown.[a-m]*", "t"}, [2]string{"teardown.[n-r]*", "t"}),
		"other targets":    doc([2]string{"teardown.[a-m]*", "t"}, [2]string{"teardown.[n-z]*", "u"}),
	}
	for name, b := range admitted {
		if _, err := ParseWaivers("w.yaml", b, WaiverClock(now)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
