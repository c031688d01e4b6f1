// The cluster's pod sandbox (pause) binary, built static by
// scripts/cluster/build.sh and packed into a locally imported image.
module github.com/sandcheck/sandcheck/cluster/pause

go 1.26.0
