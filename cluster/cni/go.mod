// A minimal CNI plugin for the sandcheck cluster, used only when Debian's
// containernetworking-plugins cannot be installed (scripts/cluster/up.sh).
module github.com/sandcheck/sandcheck/cluster/cni

go 1.26.0

require (
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
)

require golang.org/x/sys v0.50.0 // indirect
