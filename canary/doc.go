// Package canary holds out-of-band listeners that record what left a
// sandbox. A canary looks like a service hostile code would want to reach (a
// cloud metadata service, later DNS and plain sinks) and hands out honeytokens
// unique to the run. Every request it receives is a host-observed Hit: proof,
// independent of anything a probe says about itself, that the sandbox reached
// the address.
//
// Requests come from code we assume is hostile, so every listener here is
// bounded: header and body sizes, read and write timeouts, concurrent
// connections, and the number of hits kept (drops are counted).
//
// A probe attributes its requests by sending its token in the
// X-Sandcheck-Token header ("<token>" or "<token>/<probe-id>") or in a
// User-Agent product "sandcheck-probe/<token>/<probe-id>". Requests without a
// token are recorded too: something in the box reached the canary anyway.
package canary
