# Profiles of the design guide, as data. A profile states which probes a
# sandbox of its kind must block and which workloads must succeed (ID globs,
# "." separates segments), which runtime classes it accepts, its network
# ("none" or "allowlist") and which egress destinations it allows.
#
# Replace this file (a user policy with a profiles.rego) to change them;
# data.catalog still says what each probe expects, and a profile that names a
# probe overrides the catalog for that profile. Every pattern must match a
# probe of the catalog: one that matches none is a load error (a requirement
# that names nothing would hold vacuously).
package sandcheck.profiles

import rego.v1

# runtime_classes maps a runtime (the record's runtime and each sandbox's
# runtime_view.runtime) to its isolation class. A runtime not listed leaves
# hardened-runtime unconfirmed.
runtime_classes := {
	"runc": "shared-kernel",
	"crun": "shared-kernel",
	"youki": "shared-kernel",
	"runsc": "user-space-kernel",
	"kata": "microvm",
	"kata-runtime": "microvm",
	"kata-qemu": "microvm",
	"kata-fc": "microvm",
	"firecracker": "microvm",
	"vm": "vm",
}

any_class := ["shared-kernel", "user-space-kernel", "microvm", "vm"]

# Probe families every profile must block: the box keeps no identity, no
# host, no privilege, bounded resources and no state.
contained := [
	"metadata.*", "secrets.*", "host.*", "privilege.*", "syscalls.*",
	"resources.*", "persistence.*", "output.*", "teardown.*", "attribution.*",
	"egress.*",
]

profiles := {
	"no-network-transform": {
		"summary": "Parse, convert, summarize local approved files",
		"network": "none",
		"allowed_destinations": [],
		"runtime_classes": any_class,
		"must_block": contained,
		"must_succeed": ["workload.transform-*"],
	},
	"package-build": {
		"summary": "Compile or analyze code with known dependencies",
		"network": "allowlist",
		"allowed_destinations": ["package-mirror"],
		"runtime_classes": any_class,
		"must_block": contained,
		"must_succeed": ["workload.build-*", "egress.package-mirror"],
	},
	"brokered-data-task": {
		"summary": "Query or update a bounded business resource",
		"network": "allowlist",
		"allowed_destinations": ["tool-broker"],
		"runtime_classes": any_class,
		"must_block": contained,
		"must_succeed": ["workload.broker-*", "egress.tool-broker"],
	},
	"mediated-browser": {
		"summary": "Navigate approved web workflows",
		"network": "allowlist",
		"allowed_destinations": ["browser-proxy"],
		"runtime_classes": any_class,
		"must_block": contained,
		"must_succeed": ["workload.browse-*", "egress.browser-proxy"],
	},
	"high-risk-code": {
		"summary": "Untrusted generated code or adversarial files",
		"network": "none",
		"allowed_destinations": [],
		"runtime_classes": ["user-space-kernel", "microvm", "vm"],
		"must_block": contained,
		"must_succeed": ["workload.run-*"],
	},
	# The deliverable goes to the platform's publishing endpoint, which holds
	# it for scan, preview and approval before it reaches the approved
	# destination; the harness's tool broker stands for that endpoint.
	"human-approved-publish": {
		"summary": "Create an external message or deliverable",
		"network": "allowlist",
		"allowed_destinations": ["tool-broker"],
		"runtime_classes": any_class,
		"must_block": contained,
		"must_succeed": ["workload.publish-*", "egress.tool-broker"],
	},
}
