# Shared fixtures for the Rego tests: a hardened run record (every field a
# criterion reads, one sandbox with a hardened runtime view) that each test
# changes in one place.
package sandcheck.test.fixtures

import rego.v1

digest := "sha256:77c953360c3f7eddf5b231a0622a0bf88eeefa5782c513a6c273b0c1ab017a04"

view := {
	"runtime": "runsc", "privileged": false, "user": "65534:65534",
	"cap_add": null, "cap_drop": ["ALL"], "seccomp": "default",
	"no_new_privileges": true, "read_only_rootfs": true,
	"masked_paths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"],
	"mounts": [
		{"type": "bind", "source": "/tmp/run/probe", "destination": "/.sandcheck", "read_only": true},
		{"type": "tmpfs", "source": "", "destination": "/scratch", "read_only": false},
	],
	"network_mode": "none", "pids_limit": 64, "memory_bytes": 134217728, "nano_cpus": 1000000000,
	"env_names": ["PATH"], "image": "sandcheck/runner:dev", "image_digest": digest,
}

sandbox := {"id": "c1", "name": "shared", "probes": [], "start_seconds": 0.5, "runtime_view": view, "teardown_checked": true}

record_base := {
	"schema": "sandcheck.dev/run/v1",
	"run_id": "run-1",
	"started_by": "ci",
	"tool": {"version": "test", "policy_version": digest},
	"target": {"name": "hardened", "path": "t.yaml", "digest": digest, "profile": "high-risk-code"},
	"runner": "docker",
	"runtime": "runsc",
	"image": {"ref": "sandcheck/runner:dev", "digest": digest},
	"sandboxes": [sandbox],
	"results": [],
}

# with_view returns the record with the sandbox's view patched.
with_view(rec, patch) := object.union(rec, {"sandboxes": [object.union(sandbox, {"runtime_view": object.union(view, patch)})]})
