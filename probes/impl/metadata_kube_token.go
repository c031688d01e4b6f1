package impl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// serviceAccountPaths are where the kubelet mounts a pod's service-account
// token; /run is tried too for images without /var/run.
var serviceAccountPaths = []string{
	"/var/run/secrets/kubernetes.io/serviceaccount/token",
	"/run/secrets/kubernetes.io/serviceaccount/token",
	"/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
	"/var/run/secrets/tokens/token",
}

func init() {
	register(map[string]Func{"metadata.k8s-service-account": k8sServiceAccount})
}

// k8sServiceAccount reads the Kubernetes service-account token files a pod
// gets by default (automountServiceAccountToken), bounded, following the
// box's own links (the kubelet mounts the token as a link into a
// timestamped folder; the never-follow rule is for the host reading what a
// box wrote), and reports whether a token was readable with a proof of it. It
// also notes whether the API server's address is in the environment, but
// sends nothing to it: the probe reaches only addresses the harness gives.
func k8sServiceAccount(_ context.Context, p probes.Params) probes.Result {
	e := ev{}
	if h := getenvClean("KUBERNETES_SERVICE_HOST"); h != "" {
		e.set("kubernetes_service_host", h+":"+getenvClean("KUBERNETES_SERVICE_PORT"))
	}
	var denied []string
	for _, path := range serviceAccountPaths {
		b, err := readSandboxFile(path)
		if err != nil {
			if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
				lbl := "error"
				if n, ok := errnoOf(err); ok {
					lbl = errnoLabel(n)
				}
				denied = append(denied, path+":"+lbl)
			}
			continue
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 {
			continue
		}
		e.set("token_path", path)
		e.setInt("token_bytes", len(tok))
		e.set("jwt_shaped", fmt.Sprint(strings.Count(tok, ".") == 2 && strings.HasPrefix(tok, "eyJ")))
		e.set("proofs", proof(p.Token, tok))
		return escaped("read a Kubernetes service-account token at "+path, e)
	}
	if len(denied) > 0 {
		e.setList("denied", denied)
	}
	return blocked("no readable Kubernetes service-account token", e)
}

func getenvClean(name string) string { return clip(os.Getenv(name), 128) }
