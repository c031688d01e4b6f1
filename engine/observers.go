package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/evidence"
	"github.com/sandcheck/sandcheck/probes"
	"github.com/sandcheck/sandcheck/runners"
)

// observation is what an observer is given about one probe run.
type observation struct {
	spec  probes.Spec
	token string
	s     *sandbox
	self  selfReport
}

// observer turns what the host saw of one probe run into evidence items of
// one kind (the catalog's host: entry).
type observer func(e *Engine, kind string, o observation) []evidence.Item

// observers is the closed vocabulary of host evidence as the engine
// produces it: one observer per kind of probes.HostKinds (a test holds the
// two equal). A nil observer marks kinds gathered elsewhere: teardown kinds
// after the sandbox is closed (teardown.go), environ-holder when the
// sandbox starts (creds.go). The path kinds (netpath:*) are the keys of
// netpathChecks, each with netpathObserver. It is a fixed table, never
// written after it is made.
var observers = withPathKinds(map[string]observer{
	"runtime:hostname": identityObserver, "runtime:labels": identityObserver,
	"runtime:runtime-class": fingerprintObserver, "runtime:confinement": fingerprintObserver,
	"runtime:host-kernel": fingerprintObserver, "runtime:host-cgroup": fingerprintObserver,
	"runtime:caps": runtimeObserver, "runtime:devices": runtimeObserver, "runtime:env": runtimeObserver,
	"runtime:masked-paths": runtimeObserver, "runtime:memory-limit": runtimeObserver, "runtime:mounts": runtimeObserver,
	"runtime:no-new-privileges": runtimeObserver, "runtime:oom": runtimeObserver, "runtime:pid": runtimeObserver,
	"runtime:pids-limit": runtimeObserver, "runtime:read-only-rootfs": runtimeObserver,
	"runtime:seccomp": runtimeObserver, "runtime:user": runtimeObserver,
	"canary:broker": canaryObserver, "canary:dns": canaryObserver, "canary:kube-api": canaryObserver,
	"canary:metadata": canaryObserver, "canary:proxy": canaryObserver, "canary:sink": canaryObserver,
	"runtime:execd-published":   platformObserver,
	"runtime:carryover-keyring": carryoverObserver, "runtime:carryover-processes": carryoverObserver, "runtime:carryover-scratch": carryoverObserver,
	"runtime:scratch-limits": scratchLimitsObserver,
	// The broker's record (broker.go); replay is gathered after close.
	"broker:lifetime": brokerObserver, "broker:scope": brokerObserver, "broker:revocation": brokerObserver, "broker:replay": nil,
	"inputs:read": func(e *Engine, k string, o observation) []evidence.Item {
		return []evidence.Item{e.inputsEvidence(k, o.token, o.self)}
	},
	"inputs:intact": func(e *Engine, k string, o observation) []evidence.Item {
		return []evidence.Item{e.inputsEvidence(k, o.token, o.self)}
	},
	"cpu-budget": func(e *Engine, _ string, o observation) []evidence.Item {
		return []evidence.Item{e.cpuBudgetEvidence(o.s)}
	},
	"output:workload": func(e *Engine, _ string, o observation) []evidence.Item {
		return []evidence.Item{e.workloadOutputEvidence(o.token)}
	},
	"output:release": func(e *Engine, _ string, o observation) []evidence.Item {
		return e.outputEvidence(o.spec, o.token)
	},
	"honeytoken": func(e *Engine, _ string, o observation) []evidence.Item {
		items := maybe(e.creds.check(o.spec.ID, o.token, o.self.Fields["proofs"]))
		if o.s != nil {
			items = append(items, maybe(e.creds.exposure(o.spec.ID, o.s.view))...)
		}
		return items
	},
	"agent-socket": func(e *Engine, _ string, o observation) []evidence.Item {
		if e.creds == nil || e.creds.agent == nil {
			return nil
		}
		return []evidence.Item{e.creds.agent.evidence(o.spec, o.token)}
	},
	"honeyfile": func(e *Engine, _ string, o observation) []evidence.Item {
		return maybe(e.honey.check(o.self.Fields["honeyfile_token"]))
	},
	"canary-process": func(e *Engine, _ string, o observation) []evidence.Item {
		return maybe(e.proc.check(o.self.Fields["canary_process_token"]))
	},
	"block-canary": func(e *Engine, _ string, o observation) []evidence.Item {
		var opened []string
		if v := o.self.Fields["opened_rdevs"]; v != "" {
			opened = strings.Split(v, ",")
		}
		return maybe(e.block.check(opened))
	},
	environHolderHost:    nil,
	"teardown:cgroups":   nil,
	"teardown:container": nil,
	"teardown:mounts":    nil,
	"teardown:network":   nil,
	"teardown:processes": nil,
	"teardown:scratch":   nil,
})

// withPathKinds adds the path kinds of netpathChecks to a table of observers.
func withPathKinds(m map[string]observer) map[string]observer {
	for k := range netpathChecks {
		m[k] = netpathObserver
	}
	return m
}

func maybe(it evidence.Item, ok bool) []evidence.Item {
	if !ok {
		return nil
	}
	return []evidence.Item{it}
}

func identityObserver(e *Engine, kind string, o observation) []evidence.Item {
	if o.s.view == nil {
		return nil
	}
	return []evidence.Item{e.identityFact(strings.TrimPrefix(kind, "runtime:"), o.s.view)}
}

func fingerprintObserver(e *Engine, kind string, o observation) []evidence.Item {
	return maybe(e.fingerprintEvidence(kind, o.s, o.self))
}

// runtimeObserver reports a fact of the target's own configuration where the
// harness started the sandbox with it, and otherwise the runtime's view.
func runtimeObserver(e *Engine, kind string, o observation) []evidence.Item {
	fact := strings.TrimPrefix(kind, "runtime:")
	if it, ok := e.targetFact(fact, o.spec); ok {
		return []evidence.Item{it}
	}
	if o.s.view == nil {
		return nil
	}
	return maybe(runtimeFact(fact, o.spec, e.viewForFacts(kind, o.s.view)))
}

func canaryObserver(e *Engine, kind string, o observation) []evidence.Item {
	return e.canaryHits(strings.TrimPrefix(kind, "canary:"), o.spec, o.token, o.self)
}

// platformObserver asks the sandbox's platform, from the host, for a fact
// the runtime view does not carry (runners.HostChecker, the kind's name
// after "runtime:"); a sandbox that cannot be checked
// gives no evidence, and a check that failed says so without indicating.
func platformObserver(_ *Engine, kind string, o observation) []evidence.Item {
	hc, ok := o.s.sb.(runners.HostChecker)
	if !ok {
		return nil
	}
	check := strings.TrimPrefix(kind, "runtime:")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := hc.HostCheck(ctx, check)
	if err != nil {
		return []evidence.Item{{Source: evidence.SourceRuntime, Kind: "host-check-failed", Summary: fmt.Sprintf("host check %s failed: %v", check, err)}}
	}
	return []evidence.Item{{Source: evidence.SourceRuntime, Kind: "host-check", Summary: f.Summary, Indicates: f.Indicates, Data: f.Data}}
}
