package probes

// ProbeMount is where the probe directory appears inside a sandbox. It is
// declared here, beside the probe's other wire facts, so the static probe
// binary needs no harness package to know it; runners re-export it.
const ProbeMount = "/.sandcheck"

// GoAheadDir is the folder of the probe directory where the harness creates
// a task's go-ahead file once it watches the sandbox (sandcheck-probe run
// --go-ahead).
const GoAheadDir = "go"

// ProbeBinary is the probe binary's file name inside the probe directory.
const ProbeBinary = "sandcheck-probe"

// LeaseFile is the file of the probe directory whose content the harness
// rewrites while the run that made the sandbox lives (internal/lease); the
// idle holder (sandcheck-probe hold --lease) ends once it stops changing.
const LeaseFile = "lease"
