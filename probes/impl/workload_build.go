package impl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// A build through the package mirror, the workload of a package-build
// profile: the task fetches its dependencies from the mirror the platform
// grants, builds in scratch and gets an artifact.
func init() {
	register(map[string]Func{"workload.build-from-mirror": workloadBuild})
	registerChild(map[string]func([]string) int{"build": childBuild})
}

// buildFetches are what the build fetches from the mirror, in order: the
// package index and one package (the harness's mirror answers any path).
var buildFetches = []string{mirrorPath, "/packages/sandcheck-demo-1.0.tar"}

// Names in the build folder: fetched sources, then the artifact the build
// step writes.
const (
	buildSourcePrefix = "src-"
	buildArtifact     = "artifact"
)

// buildMaxSources bounds how many sources the build step reads.
const buildMaxSources = 8

// workloadBuild fetches the mirror's index and one package, straight to
// the mirror's address with the probe's token, writes them to a fresh build
// folder in the first scratch place that takes one, runs the build step as a
// subprocess (the probe binary's "child build", standing for the compiler)
// and checks the artifact it wrote. Escaped means the build went through;
// blocked means the box kept it from the mirror or from building.
func workloadBuild(ctx context.Context, p probes.Params) probes.Result {
	const probe = "workload.build-from-mirror"
	e := ev{}
	if p.MirrorAddr == "" {
		return noAddress("package mirror", e)
	}
	e.set("addr", p.MirrorAddr)
	var sources [][]byte
	for _, path := range buildFetches {
		status, body, connected, err := directGet(ctx, p.MirrorAddr, path, p, probe)
		if err != nil {
			e.setErr("", err)
			if connected {
				return inconclusive("a connection to the package mirror opened, but no answer came for "+path, e)
			}
			return blocked("no connection to the package mirror could be made", e)
		}
		if status != 200 || !strings.HasPrefix(body, sinkReply+mirrorRole) {
			e.setInt("status", status)
			e.set("reply", clip(body, 100))
			return inconclusive("something answered at the package mirror's address, but not as the harness's mirror", e)
		}
		sources = append(sources, []byte(body))
	}
	e.setInt("fetched", len(sources))
	dir, tried := buildDir(p)
	e.setList("failed", tried)
	if dir == "" {
		return blocked("the mirror served the build's sources, but no scratch place (/scratch, $TMPDIR, /tmp) took a build folder", e)
	}
	defer os.RemoveAll(dir)
	e.set("dir", filepath.Dir(dir))
	for i, src := range sources {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%d", buildSourcePrefix, i)), src, 0o600); err != nil {
			e.setErr("write_", err)
			return blocked("the build's sources could not be written to scratch", e)
		}
	}
	cmd := exec.CommandContext(ctx, selfExe, "child", "build", dir)
	cmd.Env = childEnv()
	start := time.Now()
	err := cmd.Run()
	e.set("build_elapsed", time.Since(start).Round(time.Millisecond).String())
	if err != nil {
		e.setErr("build_", err)
		return blocked("the build step (a subprocess) did not run to its end", e)
	}
	got, err := os.ReadFile(filepath.Join(dir, buildArtifact))
	if err != nil {
		e.setErr("artifact_", err)
		return blocked("the build step wrote no artifact", e)
	}
	if want := buildOutput(sources); string(got) != want {
		e.set("artifact", clip(string(got), 100))
		return inconclusive("the build step's artifact is not what its sources make", e)
	}
	return escaped(fmt.Sprintf("fetched %d files from the package mirror and built an artifact from them in a subprocess", len(sources)), e)
}

// buildDir makes a fresh build folder in the first scratch place that takes
// one, returning it and the places that failed.
func buildDir(p probes.Params) (string, []string) {
	var tried []string
	for _, d := range scratchDirs() {
		dir, err := os.MkdirTemp(d, ".sandcheck-build-"+fileSafe(p.Token)+"-")
		if err == nil {
			return dir, tried
		}
		tried = append(tried, d+": "+err.Error())
	}
	return "", tried
}

// buildOutput is the artifact the build step makes of its sources: a line
// naming the digest of their concatenation in order.
func buildOutput(sources [][]byte) string {
	h := sha256.New()
	for _, s := range sources {
		h.Write(s)
	}
	return "sandcheck-build sha256:" + hex.EncodeToString(h.Sum(nil)) + "\n"
}

// childBuild is the build step: it reads the sources in the build folder
// args[0] (src-0, src-1, ..., at most buildMaxSources, each bounded) and
// writes the artifact next to them. Exit 0 on success, 1 on failure, 2 on
// bad arguments.
func childBuild(args []string) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		return 2
	}
	dir := args[0]
	names, err := filepath.Glob(filepath.Join(dir, buildSourcePrefix+"*"))
	if err != nil || len(names) == 0 || len(names) > buildMaxSources {
		return 1
	}
	slices.SortFunc(names, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	var sources [][]byte
	for _, n := range names {
		b, err := readBounded(n, 64<<10)
		if err != nil {
			return 1
		}
		sources = append(sources, b)
	}
	if err := os.WriteFile(filepath.Join(dir, buildArtifact), []byte(buildOutput(sources)), 0o600); err != nil {
		return 1
	}
	return 0
}
